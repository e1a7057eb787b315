package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/deploy"
	"capstan.dev/capstan/test/fixture"
	"capstan.dev/capstan/test/provider"
)

// The installed RBAC is enough for the manager to work, and provider kinds
// come through aggregation: the manager runs with the installed service
// account's token, nothing more.
func TestManagerRunsWithInstalledRBAC(t *testing.T) {
	ctx := context.Background()
	objs, err := deploy.Objects(deploy.Options{Image: "example.com/capstan:test"})
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range objs {
		if err := env.Client.Patch(ctx, obj, client.Apply, client.FieldOwner("e2e"), client.ForceOwnership); err != nil {
			t.Fatalf("applying %s: %v", obj.GetName(), err)
		}
	}
	if err := provider.Install(ctx, env.Client); err != nil {
		t.Fatal(err)
	}
	// What a provider ships for its kinds.
	providerRole := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "test-provider-for-capstan", Labels: map[string]string{deploy.AggregateToManagerLabel: "true"}},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{provider.InfrastructureGroup, provider.BootstrapGroup, provider.ControlPlaneGroup},
			Resources: []string{"*"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"},
		}},
	}
	if err := env.Client.Create(ctx, providerRole); err != nil {
		t.Fatal(err)
	}

	kube, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	token, err := kube.CoreV1().ServiceAccounts(deploy.Namespace).CreateToken(ctx, deploy.ManagerName,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptrTo(int64(3600))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: env.Config.Host, CertificateAuthority: env.Config.CAFile, CertificateAuthorityData: env.Config.CAData}
	cfg.AuthInfos["sa"] = &clientcmdapi.AuthInfo{Token: token.Status.Token}
	cfg.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "sa"}
	cfg.CurrentContext = "c"
	kubeconfig := filepath.Join(t.TempDir(), "manager.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, kubeconfig); err != nil {
		t.Fatal(err)
	}

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := exec.CommandContext(runCtx, env.Binary, "manager", "--kubeconfig", kubeconfig,
		"--leader-elect", "--leader-election-namespace", deploy.Namespace,
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0",
		// Capstan's own providers run too, so their aggregated rules are checked.
		"--local-dir", t.TempDir(), "--in-memory")
	var logs strings.Builder
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = cmd.Wait() }()

	ns := env.Namespace(t)
	infra := provider.InfraCluster.New(ns, "rbac", nil)
	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "rbac"}}
	cluster.Spec.InfrastructureRef = provider.InfraCluster.Ref("rbac")
	for _, o := range []client.Object{infra, cluster} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	fixture.Eventually(t, "the manager owns the infrastructure and reports on the Cluster", 90*time.Second, func(ctx context.Context) string {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(provider.InfraCluster.GVK())
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(infra), got); err != nil {
			return err.Error()
		}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cluster), cluster); err != nil {
			return err.Error()
		}
		return fixture.Unless(len(got.GetOwnerReferences()) == 1 && slices.Contains(cluster.Finalizers, clusterv1.ClusterFinalizer) &&
			cluster.Status.Phase == string(clusterv1.ClusterPhaseProvisioning), "")
	})
	if strings.Contains(logs.String(), "forbidden") {
		t.Errorf("the manager was refused something by RBAC:\n%s", grepLines(logs.String(), "forbidden"))
	}
	if t.Failed() {
		_ = os.WriteFile(filepath.Join(t.TempDir(), "manager.log"), []byte(logs.String()), 0o600)
		t.Logf("manager output:\n%s", logs.String())
	}
}

func grepLines(s, word string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, word) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
