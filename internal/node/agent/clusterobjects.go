package agent

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	bootstraptokenv1 "k8s.io/kubernetes/cmd/kubeadm/app/apis/bootstraptoken/v1"
	kubeadmapi "k8s.io/kubernetes/cmd/kubeadm/app/apis/kubeadm"

	"capstan.dev/capstan/internal/kubeadm"
)

// Names kubeadm gives the objects it leaves in a new cluster.
const (
	fieldManager = "capstan-node"

	kubeadmConfigMap   = "kubeadm-config"
	clusterInfoMap     = "cluster-info"
	nodeTokenGroup     = "system:bootstrappers:kubeadm:default-node-token"
	nodesGroup         = "system:nodes"
	clusterAdminsGroup = "kubeadm:cluster-admins"
)

// initObjects creates, with the admin credential, what kubeadm init leaves
// in a new cluster (docs/local-provider.md, "Inside the workload cluster").
// Server-side apply makes it idempotent: applying it again changes nothing.
func (a *agent) initObjects(ctx context.Context, cc *kubeadmapi.ClusterConfiguration) error {
	ca, err := a.loadCA()
	if err != nil {
		return err
	}
	endpoint := cc.ControlPlaneEndpoint
	if endpoint == "" {
		endpoint = a.apiServerAddress()
	}
	if err := applyInitObjects(ctx, a.cp.AdminConfig(), cc, "https://"+endpoint, ca.CertPEM()); err != nil {
		return err
	}
	return nil
}

// applyInitObjects applies kubeadm init's objects with an admin credential;
// server is the cluster's endpoint URL published in cluster-info.
func applyInitObjects(ctx context.Context, admin *rest.Config, cc *kubeadmapi.ClusterConfiguration, server string, caPEM []byte) error {
	cs, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return err
	}
	ccYAML, err := kubeadm.MarshalClusterConfiguration(cc)
	if err != nil {
		return fmt.Errorf("encoding the ClusterConfiguration: %w", err)
	}
	info := clientcmdapi.NewConfig()
	info.Clusters[""] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	infoYAML, err := clientcmd.Write(*info)
	if err != nil {
		return err
	}
	opts := metav1.ApplyOptions{FieldManager: fieldManager, Force: true}
	group := func(name string) *rbacv1ac.SubjectApplyConfiguration {
		return rbacv1ac.Subject().WithKind("Group").WithAPIGroup("rbac.authorization.k8s.io").WithName(name)
	}
	clusterRole := func(name string) *rbacv1ac.RoleRefApplyConfiguration {
		return rbacv1ac.RoleRef().WithKind("ClusterRole").WithAPIGroup("rbac.authorization.k8s.io").WithName(name)
	}
	steps := []struct {
		what  string
		apply func(context.Context) error
	}{
		{"ConfigMap kube-system/kubeadm-config", func(ctx context.Context) error {
			_, err := cs.CoreV1().ConfigMaps("kube-system").Apply(ctx, corev1ac.ConfigMap(kubeadmConfigMap, "kube-system").
				WithData(map[string]string{"ClusterConfiguration": string(ccYAML)}), opts)
			return err
		}},
		{"ConfigMap kube-public/cluster-info", func(ctx context.Context) error {
			_, err := cs.CoreV1().ConfigMaps("kube-public").Apply(ctx, corev1ac.ConfigMap(clusterInfoMap, "kube-public").
				WithData(map[string]string{"kubeconfig": string(infoYAML)}), opts)
			return err
		}},
		// Anyone may read cluster-info: joining nodes check it against
		// their pinned CA hash before trusting it.
		{"Role kube-public/kubeadm:bootstrap-signer-clusterinfo", func(ctx context.Context) error {
			_, err := cs.RbacV1().Roles("kube-public").Apply(ctx, rbacv1ac.Role("kubeadm:bootstrap-signer-clusterinfo", "kube-public").
				WithRules(rbacv1ac.PolicyRule().WithAPIGroups("").WithResources("configmaps").WithVerbs("get").WithResourceNames(clusterInfoMap)), opts)
			return err
		}},
		{"RoleBinding kube-public/kubeadm:bootstrap-signer-clusterinfo", func(ctx context.Context) error {
			_, err := cs.RbacV1().RoleBindings("kube-public").Apply(ctx, rbacv1ac.RoleBinding("kubeadm:bootstrap-signer-clusterinfo", "kube-public").
				WithRoleRef(rbacv1ac.RoleRef().WithKind("Role").WithAPIGroup("rbac.authorization.k8s.io").WithName("kubeadm:bootstrap-signer-clusterinfo")).
				WithSubjects(rbacv1ac.Subject().WithKind("User").WithAPIGroup("rbac.authorization.k8s.io").WithName("system:anonymous")), opts)
			return err
		}},
		// Bootstrap tokens may post CSRs, which are approved automatically;
		// nodes may renew their own client certificates.
		{"ClusterRoleBinding kubeadm:kubelet-bootstrap", func(ctx context.Context) error {
			_, err := cs.RbacV1().ClusterRoleBindings().Apply(ctx, rbacv1ac.ClusterRoleBinding("kubeadm:kubelet-bootstrap").
				WithRoleRef(clusterRole("system:node-bootstrapper")).WithSubjects(group(nodeTokenGroup)), opts)
			return err
		}},
		{"ClusterRoleBinding kubeadm:node-autoapprove-bootstrap", func(ctx context.Context) error {
			_, err := cs.RbacV1().ClusterRoleBindings().Apply(ctx, rbacv1ac.ClusterRoleBinding("kubeadm:node-autoapprove-bootstrap").
				WithRoleRef(clusterRole("system:certificates.k8s.io:certificatesigningrequests:nodeclient")).WithSubjects(group(nodeTokenGroup)), opts)
			return err
		}},
		{"ClusterRoleBinding kubeadm:node-autoapprove-certificate-rotation", func(ctx context.Context) error {
			_, err := cs.RbacV1().ClusterRoleBindings().Apply(ctx, rbacv1ac.ClusterRoleBinding("kubeadm:node-autoapprove-certificate-rotation").
				WithRoleRef(clusterRole("system:certificates.k8s.io:certificatesigningrequests:selfnodeclient")).WithSubjects(group(nodesGroup)), opts)
			return err
		}},
		// kubeadm join reads Nodes and the kubeadm-config ConfigMap.
		{"ClusterRole kubeadm:get-nodes", func(ctx context.Context) error {
			_, err := cs.RbacV1().ClusterRoles().Apply(ctx, rbacv1ac.ClusterRole("kubeadm:get-nodes").
				WithRules(rbacv1ac.PolicyRule().WithAPIGroups("").WithResources("nodes").WithVerbs("get")), opts)
			return err
		}},
		{"ClusterRoleBinding kubeadm:get-nodes", func(ctx context.Context) error {
			_, err := cs.RbacV1().ClusterRoleBindings().Apply(ctx, rbacv1ac.ClusterRoleBinding("kubeadm:get-nodes").
				WithRoleRef(clusterRole("kubeadm:get-nodes")).WithSubjects(group(nodeTokenGroup)), opts)
			return err
		}},
		{"Role kube-system/kubeadm:nodes-kubeadm-config", func(ctx context.Context) error {
			_, err := cs.RbacV1().Roles("kube-system").Apply(ctx, rbacv1ac.Role("kubeadm:nodes-kubeadm-config", "kube-system").
				WithRules(rbacv1ac.PolicyRule().WithAPIGroups("").WithResources("configmaps").WithVerbs("get").WithResourceNames(kubeadmConfigMap)), opts)
			return err
		}},
		{"RoleBinding kube-system/kubeadm:nodes-kubeadm-config", func(ctx context.Context) error {
			_, err := cs.RbacV1().RoleBindings("kube-system").Apply(ctx, rbacv1ac.RoleBinding("kubeadm:nodes-kubeadm-config", "kube-system").
				WithRoleRef(rbacv1ac.RoleRef().WithKind("Role").WithAPIGroup("rbac.authorization.k8s.io").WithName("kubeadm:nodes-kubeadm-config")).
				WithSubjects(group(nodeTokenGroup), group(nodesGroup)), opts)
			return err
		}},
		// admin.conf in kubeadm ≥ 1.29 is in this group rather than system:masters.
		{"ClusterRoleBinding kubeadm:cluster-admins", func(ctx context.Context) error {
			_, err := cs.RbacV1().ClusterRoleBindings().Apply(ctx, rbacv1ac.ClusterRoleBinding("kubeadm:cluster-admins").
				WithRoleRef(clusterRole("cluster-admin")).WithSubjects(group(clusterAdminsGroup)), opts)
			return err
		}},
	}
	for _, s := range steps {
		// The API server is ready, but its default RBAC and namespaces
		// (kube-public) may still be settling: retry briefly.
		var last error
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			last = s.apply(ctx)
			return last == nil, nil
		})
		if err != nil {
			if last == nil {
				last = err
			}
			return fmt.Errorf("creating %s in the new cluster: %w", s.what, last)
		}
	}
	return nil
}

// createBootstrapTokens creates the bootstrap tokens InitConfiguration
// lists, as kubeadm init does. Tokens without a value are skipped: kubeadm
// would invent one and print it, and nobody reads a local machine's output
// for it. An existing token is left alone, so a restart does not extend
// its expiry.
func createBootstrapTokens(ctx context.Context, admin *rest.Config, tokens []bootstraptokenv1.BootstrapToken) (int, error) {
	cs, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return 0, err
	}
	created := 0
	for i := range tokens {
		bt := tokens[i]
		if bt.Token == nil || bt.Token.ID == "" {
			continue
		}
		secret := bootstraptokenv1.BootstrapTokenToSecret(&bt)
		_, err := cs.CoreV1().Secrets(secret.Namespace).Create(ctx, secret, metav1.CreateOptions{FieldManager: fieldManager})
		switch {
		case apierrors.IsAlreadyExists(err):
		case err != nil:
			return created, fmt.Errorf("creating InitConfiguration.bootstrapTokens[%d] (id %s): %w", i, bt.Token.ID, err)
		default:
			created++
		}
	}
	return created, nil
}
