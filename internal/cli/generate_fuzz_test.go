package cli

import (
	"bufio"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"capstan.dev/capstan/internal/scheme"
)

// FuzzGenerateCluster runs `capstan generate cluster` through the real
// command tree with fuzzed values of the flags that fill the template (and
// a fuzzed --config file, the other source of the same variables). Either
// it prints YAML whose every document decodes, strictly, into a typed
// object named after the cluster in the chosen namespace with the chosen
// counts, or it fails naming a flag or the NAME argument and prints
// nothing: never a panic, never half a manifest.
func FuzzGenerateCluster(f *testing.F) {
	dir := isolateTemplateVariables(f)
	for _, s := range []struct{ name, ns, version, cps, workers, infra, flavor, config string }{
		{"demo", "default", "v1.35.8", "1", "2", "local", "", ""},
		{"prod", "prod-ns", "v1.35.8", "3", "0", "local", "ha", ""},
		{"sim", "default", "v1.35.0-rc.1", "1", "5", "in-memory", "topology", ""},
		{"managed", "a", "v1.35.8+build.1", "0x3", "010", "local", "topology", ""},
		{"true", "null", "v1.35.8", "1", "2", "in-memory", "", ""},
		{"2024-01-01", "yes", "v1.35.8", "1", "2", "local", "", ""},
		{"1e3", "0x1f", "v1.35.8", "1", "2", "local", "ha", ""},
		{"demo", "default", "v1.35.8", "1", "2", "local", "", "WORKER_MACHINE_COUNT: \"011\"\n"},
		{"demo", "default", "v1.35.8", "1", "2", "local", "", "CONTROL_PLANE_MACHINE_COUNT: 99999999999\n"},
		{"demo", "default", "v1.35.8", "1", "2", "in-memory", "", "MACHINE_BOOT_DELAY: \"0\"\nPOD_CIDR: 10.0.0.0/8\n"},
		{"demo", "default", "v1.35.8", "1", "2", "local", "", "KUBERNETES_VERSION: v1.2.3\nNAMESPACE: other\n"},
		{"-x", "--", "banana", "two", "-1", "aws", "../local/default", "[a, b]"},
	} {
		f.Add(s.name, s.ns, s.version, s.cps, s.workers, s.infra, s.flavor, s.config)
	}
	decoder := serializer.NewCodecFactory(scheme.New(), serializer.EnableStrict).UniversalDeserializer()
	configPath := filepath.Join(dir, "vars.yaml")
	f.Fuzz(func(t *testing.T, name, ns, version, cps, workers, infra, flavor, config string) {
		args := []string{"generate", "cluster",
			"--target-namespace=" + ns, "--kubernetes-version=" + version,
			"--control-plane-machine-count=" + cps, "--worker-machine-count=" + workers,
			"--infrastructure=" + infra, "--flavor=" + flavor}
		if config != "" {
			if err := os.WriteFile(configPath, []byte(config), 0o600); err != nil {
				t.Fatal(err)
			}
			args = append(args, "--config="+configPath)
		}
		out, _, err := runCapstan(t, append(args, "--", name)...)
		if err != nil {
			if out != "" {
				t.Fatalf("error %v with output:\n%s", err, out)
			}
			if msg := err.Error(); !strings.Contains(msg, "--") && !strings.Contains(msg, "NAME") && !strings.Contains(msg, "argument") {
				t.Fatalf("error names no flag nor argument: %v", err)
			}
			return
		}
		if config != "" {
			// The config file may set any variable: the flags' values
			// need not be the ones used, only valid ones.
			decodeAll(t, decoder, out, "", "")
			return
		}
		objs := decodeAll(t, decoder, out, name, ns)
		cpCount, _ := strconv.ParseInt(cps, 0, 64)
		workerCount, _ := strconv.ParseInt(workers, 0, 64)
		for _, u := range objs {
			for _, c := range []struct {
				kind string
				path []string
				want int64
			}{
				{"KubeadmControlPlane", []string{"spec", "replicas"}, cpCount},
				{"MachineDeployment", []string{"spec", "replicas"}, workerCount},
				{"Cluster", []string{"spec", "topology", "controlPlane", "replicas"}, cpCount},
			} {
				if u.GetKind() != c.kind {
					continue
				}
				if got, found, _ := unstructured.NestedInt64(u.Object, c.path...); found && got != c.want {
					t.Fatalf("%s %s: %s is %d, the flags asked for %d", u.GetKind(), u.GetName(), strings.Join(c.path, "."), got, c.want)
				}
			}
		}
	})
}

// decodeAll reads every document of a generated manifest, each of which
// must decode strictly into its typed object; with name set, every object
// must be named after the cluster (or be the built-in ClusterClass's) and
// every namespaced object be in ns.
func decodeAll(t *testing.T, decoder runtime.Decoder, manifest, name, ns string) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(manifest)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("printed YAML that does not split into documents: %v\n%s", err, manifest)
		}
		j, err := utilyaml.ToJSON(doc)
		if err != nil {
			t.Fatalf("printed a document that is not YAML: %v\n%s", err, doc)
		}
		if string(j) == "null" {
			continue
		}
		if _, _, err := decoder.Decode(j, nil, nil); err != nil {
			t.Fatalf("printed a document that is not a valid object: %v\n%s", err, doc)
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(j); err != nil {
			t.Fatalf("printed a document that is not an object: %v\n%s", err, doc)
		}
		objs = append(objs, u)
		if name == "" {
			continue
		}
		if n := u.GetName(); n != name && !strings.HasPrefix(n, name+"-") && !strings.HasPrefix(n, "capstan-") {
			t.Fatalf("%s %q is not named after cluster %q", u.GetKind(), n, name)
		}
		if u.GetNamespace() != ns {
			t.Fatalf("%s %s is in namespace %q, the flag said %q", u.GetKind(), u.GetName(), u.GetNamespace(), ns)
		}
	}
	if len(objs) == 0 {
		t.Fatal("printed no object and no error")
	}
	return objs
}
