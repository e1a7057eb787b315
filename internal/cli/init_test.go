package cli

import (
	"bytes"
	"context"
	"maps"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterctlv1 "capstan.dev/capstan/api/clusterctl/v1alpha3"
	"capstan.dev/capstan/internal/deploy"
	"capstan.dev/capstan/internal/inventory"
	"capstan.dev/capstan/internal/mgmt"
	"capstan.dev/capstan/internal/version"
)

// runCapstan runs the command line in this process and returns its output.
func runInstallCommand(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	return out.String(), err
}

// init, upgrade and delete against a real API server without a Deployment
// controller: init applies everything and then fails on its timeout saying
// what is not ready; another recorded version is refused; upgrade plan
// tells the difference; delete takes the installation out and keeps the
// CRDs.
func TestInitUpgradeDelete(t *testing.T) {
	ctx := context.Background()
	kubeconfig := filepath.Join(env.StateDir, "kubeconfig")
	t.Setenv("KUBECONFIG", "")
	if _, err := runInstallCommand(t, "init"); err == nil || !strings.Contains(err.Error(), "--kubeconfig") {
		t.Errorf("init without a kubeconfig: %v; want a request for --kubeconfig", err)
	}
	if _, err := runInstallCommand(t, "init", "--kubeconfig", kubeconfig, "--infrastructure", "aws"); err == nil || !strings.Contains(err.Error(), `"local"`) {
		t.Errorf("init --infrastructure aws: %v; want a refusal naming local", err)
	}

	out, err := runInstallCommand(t, "init", "--kubeconfig", kubeconfig, "--infrastructure", "local", "--local-dir", t.TempDir(), "--timeout", "3s")
	if err == nil {
		t.Fatalf("init succeeded without a Deployment controller:\n%s", out)
	}
	if !strings.Contains(out, "waiting for Deployment capstan-system/capstan-manager to be available") ||
		!strings.Contains(err.Error(), "not ready after 3s") || !strings.Contains(err.Error(), "no Pods") {
		t.Errorf("init output:\n%s\nerror: %v\nwant the Deployment named as awaited and the timeout explained", out, err)
	}
	ns := &corev1.Namespace{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: deploy.Namespace}, ns); err != nil || ns.Annotations[deploy.VersionAnnotation] == "" {
		t.Fatalf("namespace after init: %v, annotations %v; want the version recorded", err, ns.Annotations)
	}

	// init recorded what the manager runs in clusterctl's inventory.
	current := inventory.Version(version.Version)
	want := map[string]string{"cluster-api": current, "bootstrap-kubeadm": current, "control-plane-kubeadm": current, "infrastructure-local": current}
	if got := inventoryVersions(t); !maps.Equal(got, want) {
		t.Errorf("clusterctl's inventory after init = %v, want %v", got, want)
	}

	out, err = runInstallCommand(t, "upgrade", "plan", "--kubeconfig", kubeconfig)
	if err != nil || !strings.Contains(out, "is up to date") {
		t.Errorf("upgrade plan: %v\n%s\nwant up to date", err, out)
	}

	patch := client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"annotations":{"`+deploy.VersionAnnotation+`":"v0.0.1"}}}`))
	if err := env.Client.Patch(ctx, ns, patch); err != nil {
		t.Fatal(err)
	}
	if _, err := runInstallCommand(t, "init", "--kubeconfig", kubeconfig); err == nil || !strings.Contains(err.Error(), "capstan upgrade") {
		t.Errorf("init over v0.0.1: %v; want a refusal pointing to capstan upgrade", err)
	}
	out, err = runInstallCommand(t, "upgrade", "plan", "--kubeconfig", kubeconfig)
	if err != nil || !strings.Contains(out, "v0.0.1 → ") || !strings.Contains(out, "CRDs: unchanged") {
		t.Errorf("upgrade plan over v0.0.1: %v\n%s", err, out)
	}

	// An installation of v0.0.1: upgrade apply brings the inventory to this
	// version (and then times out waiting for a manager no Deployment
	// controller starts here).
	for _, p := range inventoryItems(t) {
		old := client.RawPatch("application/merge-patch+json", []byte(`{"version":"v0.0.1"}`))
		if err := env.Client.Patch(ctx, &p, old); err != nil {
			t.Fatal(err)
		}
	}
	out, err = runInstallCommand(t, "upgrade", "apply", "--kubeconfig", kubeconfig, "--timeout", "3s")
	if err == nil || !strings.Contains(err.Error(), "not ready after 3s") {
		t.Errorf("upgrade apply without a Deployment controller: %v\n%s\nwant a timeout waiting for the manager", err, out)
	}
	if got := inventoryVersions(t); !maps.Equal(got, want) || !strings.Contains(out, "clusterctl's inventory") {
		t.Errorf("clusterctl's inventory after upgrade apply = %v, want %v, and said so:\n%s", got, want, out)
	}

	out, err = runInstallCommand(t, "delete", "--kubeconfig", kubeconfig, "--timeout", "1m")
	if err != nil || !strings.Contains(out, "CRDs and every Cluster API object are kept") {
		t.Fatalf("delete: %v\n%s", err, out)
	}
	if out, err := runInstallCommand(t, "upgrade", "plan", "--kubeconfig", kubeconfig); err == nil || !strings.Contains(err.Error(), "capstan init") {
		t.Errorf("upgrade plan after delete: %v\n%s\nwant not installed", err, out)
	}
}

func inventoryItems(t *testing.T) []clusterctlv1.Provider {
	t.Helper()
	list := &clusterctlv1.ProviderList{}
	if err := env.Client.List(context.Background(), list, client.InNamespace(deploy.Namespace)); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// inventoryVersions maps the Provider objects in capstan-system to their
// versions.
func inventoryVersions(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, p := range inventoryItems(t) {
		out[p.Name] = p.Version
	}
	return out
}

// `capstan manager` keeps its metrics and probes on loopback unless told
// otherwise.
func TestManagerEndpointsDefaultToLoopback(t *testing.T) {
	cmd := newManagerCommand()
	for _, name := range []string{"metrics-bind-address", "health-probe-bind-address"} {
		addr := cmd.Flags().Lookup(name).DefValue
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatalf("--%s default %q: %v", name, addr, err)
		}
		if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
			t.Errorf("--%s defaults to %q, which is not a loopback address", name, addr)
		}
	}
}

// Without --local-dir, init gives the local provider the local directory of
// the plane whose local machines the cluster's Nodes are, and refuses a
// plane that holds none of them.
func TestInitLocalDirIsTheMachinesPlane(t *testing.T) {
	owner, other := t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(owner, "local", "team-a", "w", "machines", "w-cp-1"), 0o700); err != nil {
		t.Fatal(err)
	}
	node := func(name, providerID string) corev1.Node {
		return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{ProviderID: providerID}}
	}
	local := []corev1.Node{node("w-cp-1", "local://team-a/w-cp-1")}
	tests := []struct {
		name  string
		nodes []corev1.Node
		dir   string
		want  string
		err   string
	}{
		{name: "the plane that made the machines", nodes: local, dir: owner, want: filepath.Join(owner, "local")},
		{name: "another plane", nodes: local, dir: other,
			err: "the cluster's Nodes (w-cp-1) are local machines, but not of the plane in " + other + " (" + filepath.Join(other, "local") + " holds none of them): pass --state-dir with the plane that made them, or --local-dir with their local directory"},
		{name: "no local machines", nodes: []corev1.Node{node("kind-1", "kind://docker/kind/kind-1"), node("bare", "")}, dir: other, want: filepath.Join(other, "local")},
		{name: "no Nodes yet", dir: other, want: filepath.Join(other, "local")},
		{name: "one of them is the plane's", nodes: append([]corev1.Node{node("moved", "local://team-b/moved")}, local...), dir: owner, want: filepath.Join(owner, "local")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := localMachinesDir(tc.nodes, mgmt.StateDir(tc.dir))
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Errorf("got %q, %v; want the error %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
