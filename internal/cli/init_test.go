package cli

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"capstan.dev/capstan/internal/deploy"
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

	out, err = runInstallCommand(t, "delete", "--kubeconfig", kubeconfig, "--timeout", "1m")
	if err != nil || !strings.Contains(out, "CRDs and every Cluster API object are kept") {
		t.Fatalf("delete: %v\n%s", err, out)
	}
	if out, err := runInstallCommand(t, "upgrade", "plan", "--kubeconfig", kubeconfig); err == nil || !strings.Contains(err.Error(), "capstan init") {
		t.Errorf("upgrade plan after delete: %v\n%s\nwant not installed", err, out)
	}
}
