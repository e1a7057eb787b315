package schema

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// crdFile names a CRD by its file: the same name in Capstan's config/crd/bases
// and in one of upstream's crd/bases folders.
type crdFile struct {
	name     string // e.g. cluster.x-k8s.io_clusters.yaml
	upstream string // folder under the upstream module holding it
	allowed  map[string]string
}

const (
	core      = "core/config/crd/bases"
	bootstrap = "bootstrap/kubeadm/config/crd/bases"
	cp        = "controlplane/kubeadm/config/crd/bases"
)

var kinds = []crdFile{
	{name: "cluster.x-k8s.io_clusterclasses.yaml", upstream: core},
	{name: "cluster.x-k8s.io_clusters.yaml", upstream: core},
	{name: "cluster.x-k8s.io_machines.yaml", upstream: core},
	{name: "cluster.x-k8s.io_machinesets.yaml", upstream: core},
	{name: "cluster.x-k8s.io_machinedeployments.yaml", upstream: core},
	{name: "cluster.x-k8s.io_machinepools.yaml", upstream: core},
	{name: "cluster.x-k8s.io_machinehealthchecks.yaml", upstream: core},
	{name: "bootstrap.cluster.x-k8s.io_kubeadmconfigs.yaml", upstream: bootstrap},
	{name: "bootstrap.cluster.x-k8s.io_kubeadmconfigtemplates.yaml", upstream: bootstrap},
	{name: "controlplane.cluster.x-k8s.io_kubeadmcontrolplanes.yaml", upstream: cp},
	{name: "controlplane.cluster.x-k8s.io_kubeadmcontrolplanetemplates.yaml", upstream: cp},
}

func upstreamDir(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/cluster-api").Output()
	if err != nil {
		t.Fatalf("locating upstream Cluster API in the module cache: %v", err)
	}
	return strings.TrimSpace(string(out))
}

func readCRD(t *testing.T, path string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(bytes.TrimPrefix(raw, []byte("---\n")), crd); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return crd
}

func v1beta2(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition) *apiextensionsv1.CustomResourceDefinitionVersion {
	t.Helper()
	for i := range crd.Spec.Versions {
		if crd.Spec.Versions[i].Name == "v1beta2" {
			return &crd.Spec.Versions[i]
		}
	}
	t.Fatalf("%s serves no v1beta2", crd.Name)
	return nil
}

// paths lists every field path of a schema: ".a.b" for properties, "[]" for
// list items, "{}" for map values.
func paths(prefix string, s *apiextensionsv1.JSONSchemaProps, into map[string]*apiextensionsv1.JSONSchemaProps) {
	into[prefix] = s
	for name, p := range s.Properties {
		paths(prefix+"."+name, &p, into)
	}
	if s.Items != nil && s.Items.Schema != nil {
		paths(prefix+"[]", s.Items.Schema, into)
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		paths(prefix+"{}", s.AdditionalProperties.Schema, into)
	}
}

func TestSchemaFieldPathsMatchUpstream(t *testing.T) {
	up := upstreamDir(t)
	for _, k := range kinds {
		t.Run(strings.TrimSuffix(k.name, ".yaml"), func(t *testing.T) {
			ours := readCRD(t, filepath.Join("..", "..", "..", "config", "crd", "bases", k.name))
			theirs := readCRD(t, filepath.Join(up, k.upstream, k.name))
			op, tp := map[string]*apiextensionsv1.JSONSchemaProps{}, map[string]*apiextensionsv1.JSONSchemaProps{}
			paths("", v1beta2(t, ours).Schema.OpenAPIV3Schema, op)
			paths("", v1beta2(t, theirs).Schema.OpenAPIV3Schema, tp)
			var missing, extra []string
			for p := range tp {
				if _, ok := op[p]; !ok {
					missing = append(missing, p)
				}
			}
			for p := range op {
				if _, ok := tp[p]; !ok {
					extra = append(extra, p)
				}
			}
			sort.Strings(missing)
			sort.Strings(extra)
			for _, p := range missing {
				t.Errorf("missing %s", p)
			}
			for _, p := range extra {
				t.Errorf("extra %s", p)
			}
		})
	}
}
