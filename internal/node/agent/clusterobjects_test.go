package agent

import (
	"context"
	"fmt"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"capstan.dev/capstan/internal/certs"
	"capstan.dev/capstan/internal/kubeadm"
	"capstan.dev/capstan/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

func impersonate(t *testing.T, user string, groups ...string) kubernetes.Interface {
	t.Helper()
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// TestInitObjects applies what kubeadm init leaves in a cluster to a real
// API server, checks who may do what with it, and that applying it again
// writes nothing.
func TestInitObjects(t *testing.T) {
	ctx := context.Background()
	docs, err := kubeadm.Parse([]byte(v1beta4InitForTest))
	if err != nil {
		t.Fatal(err)
	}
	ca, err := certs.NewCA("kubernetes", certs.DefaultKeyAlgorithm, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := applyInitObjects(ctx, env.Config, docs.Cluster, "https://127.0.0.1:40123", ca.CertPEM()); err != nil {
		t.Fatal(err)
	}
	admin, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	cm, err := admin.CoreV1().ConfigMaps("kube-system").Get(ctx, "kubeadm-config", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	again, err := kubeadm.Parse([]byte(cm.Data["ClusterConfiguration"]))
	if err != nil || again.Cluster == nil || again.Cluster.ClusterName != "c1" || again.Cluster.ControlPlaneEndpoint != "127.0.0.1:40123" {
		t.Fatalf("kubeadm-config does not hold the ClusterConfiguration: %v\n%s", err, cm.Data["ClusterConfiguration"])
	}

	// Anyone may read cluster-info, and only that.
	anon := impersonate(t, "system:anonymous", "system:unauthenticated")
	info, err := anon.CoreV1().ConfigMaps("kube-public").Get(ctx, "cluster-info", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("anonymous read of cluster-info: %v", err)
	}
	caPEM, server, err := clusterInfoCA([]byte(info.Data["kubeconfig"]))
	if err != nil || server != "https://127.0.0.1:40123" || string(caPEM) != string(ca.CertPEM()) {
		t.Errorf("cluster-info = %q %q %v", server, caPEM, err)
	}
	if _, err := anon.CoreV1().ConfigMaps("kube-system").Get(ctx, "kubeadm-config", metav1.GetOptions{}); err == nil {
		t.Error("anonymous may read kubeadm-config")
	}

	// A bootstrap token may ask for a node client certificate (approved
	// automatically), read Nodes and kubeadm-config; a node may renew.
	checks := []struct {
		user   string
		groups []string
		attr   authorizationv1.ResourceAttributes
		want   bool
	}{
		{"system:bootstrap:abcdef", []string{"system:bootstrappers", nodeTokenGroup}, authorizationv1.ResourceAttributes{Group: "certificates.k8s.io", Resource: "certificatesigningrequests", Verb: "create"}, true},
		{"system:bootstrap:abcdef", []string{"system:bootstrappers", nodeTokenGroup}, authorizationv1.ResourceAttributes{Group: "certificates.k8s.io", Resource: "certificatesigningrequests", Subresource: "nodeclient", Verb: "create"}, true},
		{"system:bootstrap:abcdef", []string{"system:bootstrappers", nodeTokenGroup}, authorizationv1.ResourceAttributes{Resource: "nodes", Verb: "get", Name: "w1"}, true},
		{"system:bootstrap:abcdef", []string{"system:bootstrappers", nodeTokenGroup}, authorizationv1.ResourceAttributes{Resource: "configmaps", Namespace: "kube-system", Name: "kubeadm-config", Verb: "get"}, true},
		{"system:bootstrap:abcdef", []string{"system:bootstrappers", nodeTokenGroup}, authorizationv1.ResourceAttributes{Resource: "secrets", Namespace: "kube-system", Verb: "list"}, false},
		{"system:bootstrap:abcdef", []string{"system:bootstrappers"}, authorizationv1.ResourceAttributes{Group: "certificates.k8s.io", Resource: "certificatesigningrequests", Subresource: "nodeclient", Verb: "create"}, false},
		{"system:node:w1", []string{"system:nodes"}, authorizationv1.ResourceAttributes{Group: "certificates.k8s.io", Resource: "certificatesigningrequests", Subresource: "selfnodeclient", Verb: "create"}, true},
		{"someone", []string{clusterAdminsGroup}, authorizationv1.ResourceAttributes{Resource: "secrets", Namespace: "kube-system", Verb: "list"}, true},
	}
	for _, c := range checks {
		attr := c.attr
		r, err := impersonate(t, c.user, c.groups...).AuthorizationV1().SelfSubjectAccessReviews().Create(ctx,
			&authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &attr}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if r.Status.Allowed != c.want {
			t.Errorf("%s %v may %s %s/%s: %v, want %v", c.user, c.groups, attr.Verb, attr.Resource, attr.Subresource, r.Status.Allowed, c.want)
		}
	}

	// Applying again (a restarted init) changes nothing.
	before := versions(t, admin)
	if err := applyInitObjects(ctx, env.Config, docs.Cluster, "https://127.0.0.1:40123", ca.CertPEM()); err != nil {
		t.Fatal(err)
	}
	after := versions(t, admin)
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s was rewritten: resourceVersion %s -> %s", k, v, after[k])
		}
	}
}

func versions(t *testing.T, cs kubernetes.Interface) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	get := func(name string, obj metav1.Object, err error) {
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out[name] = obj.GetResourceVersion()
	}
	cm, err := cs.CoreV1().ConfigMaps("kube-system").Get(ctx, "kubeadm-config", metav1.GetOptions{})
	get("kubeadm-config", cm, err)
	ci, err := cs.CoreV1().ConfigMaps("kube-public").Get(ctx, "cluster-info", metav1.GetOptions{})
	get("cluster-info", ci, err)
	crb, err := cs.RbacV1().ClusterRoleBindings().Get(ctx, "kubeadm:node-autoapprove-bootstrap", metav1.GetOptions{})
	get("kubeadm:node-autoapprove-bootstrap", crb, err)
	rb, err := cs.RbacV1().RoleBindings("kube-system").Get(ctx, "kubeadm:nodes-kubeadm-config", metav1.GetOptions{})
	get("kubeadm:nodes-kubeadm-config", rb, err)
	return out
}

const v1beta4InitForTest = `apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
clusterName: c1
controlPlaneEndpoint: 127.0.0.1:40123
---
apiVersion: kubeadm.k8s.io/v1beta4
kind: InitConfiguration
`

func TestCreateBootstrapTokens(t *testing.T) {
	ctx := context.Background()
	// A fresh token ID per run: the API server outlives one test run.
	id := fmt.Sprintf("t%05d", time.Now().UnixNano()%100000)
	docs, err := kubeadm.Parse([]byte(`apiVersion: kubeadm.k8s.io/v1beta4
kind: InitConfiguration
bootstrapTokens:
- token: ` + id + `.0123456789abcdef
  ttl: 1h
  groups: [system:bootstrappers:kubeadm:default-node-token]
- description: no value, skipped
`))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		n, err := createBootstrapTokens(ctx, env.Config, docs.Init.BootstrapTokens)
		if err != nil {
			t.Fatal(err)
		}
		if want := 1 - i; n != want {
			t.Errorf("run %d created %d tokens, want %d", i, n, want)
		}
	}
	admin, _ := kubernetes.NewForConfig(env.Config)
	s, err := admin.CoreV1().Secrets("kube-system").Get(ctx, "bootstrap-token-"+id, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	exp, err := time.Parse(time.RFC3339, string(s.Data["expiration"]))
	if s.Type != corev1.SecretTypeBootstrapToken || string(s.Data["token-secret"]) != "0123456789abcdef" || err != nil || time.Until(exp) > time.Hour || time.Until(exp) < 50*time.Minute {
		t.Errorf("token secret = %s %v (expiration %v)", s.Type, s.Data, err)
	}
	if string(s.Data["auth-extra-groups"]) != "system:bootstrappers:kubeadm:default-node-token" || string(s.Data["usage-bootstrap-authentication"]) != "true" {
		t.Errorf("token secret data = %v", s.Data)
	}
}
