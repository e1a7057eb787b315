package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	controlplanev1 "capstan.dev/capstan/api/controlplane/kubeadm/v1beta2"
	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	inmemoryv1 "capstan.dev/capstan/api/infrastructure/inmemory/v1beta2"
	localv1 "capstan.dev/capstan/api/infrastructure/local/v1beta2"
	qemuv1 "capstan.dev/capstan/api/infrastructure/qemu/v1beta2"
)

// isolateTemplateVariables keeps the user's environment and config file out
// of a generate test: the variables the templates use are unset and the
// default config file is looked for in an empty directory.
func isolateTemplateVariables(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", dir)
	for _, k := range []string{"CLUSTER_NAME", "NAMESPACE", "KUBERNETES_VERSION", "CONTROL_PLANE_MACHINE_COUNT", "WORKER_MACHINE_COUNT", "POD_CIDR", "SERVICE_CIDR", "MACHINE_BOOT_DELAY", "CONTROL_PLANE_MACHINE_CPUS", "CONTROL_PLANE_MACHINE_MEMORY_MIB", "WORKER_MACHINE_CPUS", "WORKER_MACHINE_MEMORY_MIB", "WORKER_NODE_STARTUP_TIMEOUT_SECONDS", "WORKER_UNHEALTHY_TIMEOUT_SECONDS"} {
		t.Setenv(k, "") // restores the old value when the test ends
		os.Unsetenv(k)
	}
	return dir
}

func TestGenerateClusterGolden(t *testing.T) {
	isolateTemplateVariables(t)
	for _, tc := range []struct {
		golden string
		args   []string
	}{
		{"generate-default.golden", []string{"demo", "--kubernetes-version", "v1.35.8"}},
		{"generate-ha.golden", []string{"prod", "--flavor", "ha", "--kubernetes-version", "v1.35.8", "-n", "prod-ns"}},
		{"generate-ha-variables.golden", []string{"prod", "--flavor", "ha", "--list-variables", "--kubernetes-version", "v1.35.8"}},
		{"generate-topology.golden", []string{"demo", "--flavor", "topology", "--kubernetes-version", "v1.35.8"}},
		{"generate-qemu.golden", []string{"vms", "--infrastructure", "qemu", "--kubernetes-version", "v1.35.8"}},
		{"generate-topology-in-memory-variables.golden", []string{"sim", "--infrastructure", "in-memory", "--flavor", "topology", "--list-variables", "--kubernetes-version", "v1.35.8"}},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			out, errOut, err := runCapstan(t, append([]string{"generate", "cluster"}, tc.args...)...)
			if err != nil {
				t.Fatalf("%v\n%s", err, errOut)
			}
			golden(t, tc.golden, []byte(out))
		})
	}
}

// manifestValues reads the fields the precedence test looks at.
func manifestValues(t *testing.T, manifest string) map[string]string {
	t.Helper()
	vals := map[string]string{}
	for _, obj := range decodeManifest(t, manifest) {
		switch obj.GetKind() {
		case "KubeadmControlPlane":
			r, _, _ := unstructured.NestedFieldNoCopy(obj.Object, "spec", "replicas")
			v, _, _ := unstructured.NestedString(obj.Object, "spec", "version")
			vals["cp"], vals["version"] = toString(r), v
			vals["namespace"] = obj.GetNamespace()
		case "MachineDeployment":
			r, _, _ := unstructured.NestedFieldNoCopy(obj.Object, "spec", "replicas")
			vals["workers"] = toString(r)
		}
	}
	return vals
}

func toString(v any) string {
	if v == nil {
		return ""
	}
	return fmt.Sprint(v)
}

func decodeManifest(t *testing.T, manifest string) []*unstructured.Unstructured {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(manifest), 4096)
	var out []*unstructured.Unstructured
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out
			}
			t.Fatalf("manifest does not decode: %v", err)
		}
		if len(obj.Object) > 0 {
			out = append(out, obj)
		}
	}
}

func TestGenerateVariablePrecedence(t *testing.T) {
	dir := isolateTemplateVariables(t)
	defaultConfig := filepath.Join(dir, "capstan", "capstan.yaml")
	if err := os.MkdirAll(filepath.Dir(defaultConfig), 0o755); err != nil {
		t.Fatal(err)
	}
	otherConfig := filepath.Join(dir, "other.yaml")
	if err := os.WriteFile(otherConfig, []byte("WORKER_MACHINE_COUNT: 7\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		config string // the default config file's content; "" for none
		env    map[string]string
		args   []string
		want   map[string]string
	}{
		{name: "template defaults, then flag defaults", args: []string{"--flavor", "ha"},
			want: map[string]string{"cp": "3", "workers": "2", "version": embeddedKubernetesVersion(), "namespace": "default"}},
		{name: "default flavor", want: map[string]string{"cp": "1", "workers": "2"}},
		{name: "config file beats template defaults", config: "CONTROL_PLANE_MACHINE_COUNT: 5\nWORKER_MACHINE_COUNT: 4\nKUBERNETES_VERSION: v1.35.1\nNAMESPACE: from-file\n",
			args: []string{"--flavor", "ha"}, want: map[string]string{"cp": "5", "workers": "4", "version": "v1.35.1", "namespace": "from-file"}},
		{name: "environment beats config file", config: "WORKER_MACHINE_COUNT: 4\nKUBERNETES_VERSION: v1.35.1\n",
			env: map[string]string{"WORKER_MACHINE_COUNT": "6", "KUBERNETES_VERSION": "v1.35.2"}, want: map[string]string{"workers": "6", "version": "v1.35.2"}},
		{name: "flags beat environment", config: "WORKER_MACHINE_COUNT: 4\n", env: map[string]string{"WORKER_MACHINE_COUNT": "6", "NAMESPACE": "env"},
			args: []string{"--worker-machine-count", "3", "--kubernetes-version", "v1.35.3", "-n", "flag", "--control-plane-machine-count", "1", "--flavor", "ha"},
			want: map[string]string{"workers": "3", "version": "v1.35.3", "namespace": "flag", "cp": "1"}},
		{name: "--config replaces the default file", config: "WORKER_MACHINE_COUNT: 4\n", args: []string{"--config", otherConfig},
			want: map[string]string{"workers": "7"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			os.Remove(defaultConfig)
			if tc.config != "" {
				if err := os.WriteFile(defaultConfig, []byte(tc.config), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			out, _, err := runCapstan(t, append([]string{"generate", "cluster", "demo"}, tc.args...)...)
			if err != nil {
				t.Fatal(err)
			}
			got := manifestValues(t, out)
			for k, want := range tc.want {
				if got[k] != want {
					t.Errorf("%s = %q, want %q", k, got[k], want)
				}
			}
		})
	}
}

func TestGenerateErrors(t *testing.T) {
	dir := isolateTemplateVariables(t)
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name    string
		args    []string
		want    string
		cluster string // the NAME argument; demo when empty
	}{
		{name: "cluster name not a DNS label", cluster: "Demo.1", want: `the NAME argument "Demo.1": must be a DNS label`},
		{"every missing variable named", []string{"--from", write("missing.yaml", "a: ${ZED}\nb: ${ALPHA}\nc: ${CLUSTER_NAME}\n")}, "value for variables [ALPHA, ZED] is not set", ""},
		{"malformed reference", []string{"--from", write("bad.yaml", "a: 1\nb: ${OOPS\n")}, `line 2: malformed variable reference: "${OOPS" has no closing brace`, ""},
		{"unknown flavor", []string{"--flavor", "huge"}, `--flavor "huge": the local provider has no such flavor; it has default, ha, topology`, ""},
		{"explicit config missing", []string{"--config", filepath.Join(dir, "nope.yaml")}, "--config: reading the variables file", ""},
		{"count not a number", []string{"--config", write("nan.yaml", "WORKER_MACHINE_COUNT: many\n")}, `--worker-machine-count (WORKER_MACHINE_COUNT) "many": must be a whole number`, ""},
		{"no control plane", []string{"--control-plane-machine-count", "0"}, `--control-plane-machine-count (CONTROL_PLANE_MACHINE_COUNT) "0": must be at least 1`, ""},
		{"even control plane", []string{"--control-plane-machine-count", "2"}, `--control-plane-machine-count (CONTROL_PLANE_MACHINE_COUNT) "2": must be odd, so that etcd keeps a quorum when a machine fails: use 1 or 3`, ""},
		{"even control plane from the config file", []string{"--flavor", "ha", "--config", write("even.yaml", "CONTROL_PLANE_MACHINE_COUNT: 4\n")}, `"4": must be odd`, ""},
		{"negative workers", []string{"--worker-machine-count", "-1"}, `--worker-machine-count (WORKER_MACHINE_COUNT) "-1": must not be negative`, ""},
		{"version not a version", []string{"--kubernetes-version", "banana"}, `--kubernetes-version (KUBERNETES_VERSION) "banana": must be a Kubernetes release version with a leading v`, ""},
		{"version without v", []string{"--kubernetes-version", "1.35.0"}, `--kubernetes-version (KUBERNETES_VERSION) "1.35.0": must be a Kubernetes release version with a leading v`, ""},
		{"topology flavor checks its version too", []string{"--flavor", "topology", "--kubernetes-version", "v1.35"}, `--kubernetes-version (KUBERNETES_VERSION) "v1.35"`, ""},
		{"qemu has the default flavor only", []string{"--infrastructure", "qemu", "--flavor", "ha"}, `--flavor "ha": the qemu provider has no such flavor; it has default`, ""},
		{"qemu even control plane", []string{"--infrastructure", "qemu", "--control-plane-machine-count", "2"}, `"2": must be odd`, ""},
		{"qemu memory too small", []string{"--infrastructure", "qemu", "--config", write("mem.yaml", "WORKER_MACHINE_MEMORY_MIB: 512\n")}, `WORKER_MACHINE_MEMORY_MIB (environment or --config) "512": must be at least 1024`, ""},
		{"qemu node startup timeout too short", []string{"--infrastructure", "qemu", "--config", write("mhc.yaml", "WORKER_NODE_STARTUP_TIMEOUT_SECONDS: 10\n")}, `WORKER_NODE_STARTUP_TIMEOUT_SECONDS (environment or --config) "10": must be 0 (no limit) or at least 30`, ""},
		{"qemu unhealthy timeout not a number", []string{"--infrastructure", "qemu", "--config", write("mhc2.yaml", "WORKER_UNHEALTHY_TIMEOUT_SECONDS: 5m\n")}, `WORKER_UNHEALTHY_TIMEOUT_SECONDS (environment or --config) "5m": must be a whole number`, ""},
		{"qemu cpus not a number", []string{"--infrastructure", "qemu", "--config", write("cpus.yaml", "CONTROL_PLANE_MACHINE_CPUS: two\n")}, `CONTROL_PLANE_MACHINE_CPUS (environment or --config) "two": must be a whole number`, ""},
		{"in-memory topology flavor", []string{"--infrastructure", "in-memory", "--flavor", "topology", "--control-plane-machine-count", "2"}, `"2": must be odd`, ""},
		{"namespace not a DNS label", []string{"-n", "My_Namespace"}, `--target-namespace (NAMESPACE) "My_Namespace": must be a DNS label`, ""},
		{"pod CIDR", []string{"--config", write("cidr.yaml", "POD_CIDR: everything\n")}, `POD_CIDR (environment or --config) "everything": must be a CIDR block`, ""},
		{"boot delay", []string{"--infrastructure", "in-memory", "--config", write("delay.yaml", "MACHINE_BOOT_DELAY: soon\n")}, `MACHINE_BOOT_DELAY (environment or --config) "soon": must be a duration`, ""},
		{"every bad value named at once", []string{"--kubernetes-version", "banana", "--worker-machine-count", "-2"}, `"banana": must be a Kubernetes release version with a leading v, such as ` + embeddedKubernetesVersion() + "\n--worker-machine-count (WORKER_MACHINE_COUNT) \"-2\"", ""},
		{"provider without templates", []string{"--infrastructure", "aws"}, `--infrastructure "aws": there are built-in templates for in-memory, local, qemu only; use --from for other providers`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := "demo"
			if tc.cluster != "" {
				name = tc.cluster
			}
			out, _, err := runCapstan(t, append([]string{"generate", "cluster", name}, tc.args...)...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
			if out != "" {
				t.Errorf("printed a manifest with the error:\n%s", out)
			}
		})
	}
}

// TestGeneratedClustersAreValid applies the built-in flavors' output to a
// real API server: its validation accepts them as they are.
func TestGeneratedClustersAreValid(t *testing.T) {
	isolateTemplateVariables(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	for _, tc := range []struct{ name, infrastructure, flavor string }{
		{"c-default", "local", "default"},
		{"c-ha", "local", "ha"},
		{"c-sim", "in-memory", "default"},
		{"c-vms", "qemu", "default"},
	} {
		out, _, err := runCapstan(t, "generate", "cluster", tc.name, "--infrastructure", tc.infrastructure, "--flavor", tc.flavor, "-n", ns)
		if err != nil {
			t.Fatal(err)
		}
		if err := applyManifests(ctx, env.Client, out); err != nil {
			t.Fatalf("the API server refuses the %s %s flavor: %v", tc.infrastructure, tc.flavor, err)
		}
	}
	sim := &inmemoryv1.InMemoryCluster{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "c-sim"}, sim); err != nil {
		t.Fatal(err)
	}
	if d := sim.Spec.Delays; d == nil || d.Machine == nil || d.Machine.Duration != 10*time.Second {
		t.Errorf("in-memory cluster stored with delays %+v, want machines booting in 10s", d)
	}
	kcp := &controlplanev1.KubeadmControlPlane{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "c-ha-control-plane"}, kcp); err != nil {
		t.Fatal(err)
	}
	if *kcp.Spec.Replicas != 3 {
		t.Errorf("HA control plane stored with %d replicas", *kcp.Spec.Replicas)
	}
	qmt := &qemuv1.QEMUMachineTemplate{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "c-vms-md-0"}, qmt); err != nil {
		t.Fatal(err)
	}
	if s := qmt.Spec.Template.Spec; s.CPUs != 2 || s.MemoryMiB != 2048 {
		t.Errorf("QEMU worker template stored with %d CPUs and %d MiB, want 2 and 2048", s.CPUs, s.MemoryMiB)
	}
	md := &clusterv1.MachineDeployment{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "c-vms-md-0"}, md); err != nil {
		t.Fatal(err)
	}
	if r := md.Spec.Replicas; r == nil || *r != 1 {
		t.Errorf("QEMU workers stored with %v replicas, want 1", r)
	}
	lc := &localv1.LocalCluster{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "c-ha"}, lc); err != nil {
		t.Fatal(err)
	}
	if len(lc.Spec.FailureDomains) != 3 {
		t.Errorf("HA LocalCluster stored with failure domains %v", lc.Spec.FailureDomains)
	}
}
