package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// provider install prints the kubeconfig of the provider's own
// ServiceAccount for its manager, never the management cluster's admin
// kubeconfig it was run with.
func TestProviderInstallHandsTheManagerItsOwnKubeconfig(t *testing.T) {
	ns := env.Namespace(t)
	components := filepath.Join(t.TempDir(), "components.yaml")
	yaml := strings.ReplaceAll(`apiVersion: v1
kind: Namespace
metadata: {name: NS}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: manager, namespace: NS}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: NS-manager}
rules: [{apiGroups: [""], resources: [configmaps], verbs: [get]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: NS-manager}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: NS-manager}
subjects: [{kind: ServiceAccount, name: manager, namespace: NS}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: controller-manager, namespace: NS}
spec:
  selector: {matchLabels: {app: m}}
  template:
    metadata: {labels: {app: m}}
    spec:
      serviceAccountName: manager
      containers: [{name: manager, image: example/manager:v1.0.0}]
`, "NS", ns)
	if err := os.WriteFile(components, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	out, _, err := runCapstan(t, "provider", "install", "infrastructure-clitest", "--state-dir", state, "--kubeconfig", envKubeconfig(),
		"--version", "v1.0.0", "--components", components, "--webhook-port", "9555")
	if err != nil {
		t.Fatalf("provider install: %v\n%s", err, out)
	}
	own := filepath.Join(state, "providers", "infrastructure-clitest", "kubeconfig")
	if !strings.Contains(out, "--kubeconfig "+own+" --webhook-port 9555") || !strings.Contains(out, "ServiceAccount "+ns+"/manager") {
		t.Errorf("provider install does not hand the manager %s:\n%s", own, out)
	}
	if strings.Contains(out, envKubeconfig()) {
		t.Errorf("provider install names the admin kubeconfig %s:\n%s", envKubeconfig(), out)
	}
	if fi, err := os.Stat(own); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("%s: %v, mode %v; want 0600", own, err, fi)
	}
}
