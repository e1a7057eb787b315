package schema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// The folders of upstream's module that hold the CRDs of each provider.
const (
	coreCRDs         = "core/config/crd/bases"
	bootstrapCRDs    = "bootstrap/kubeadm/config/crd/bases"
	controlPlaneCRDs = "controlplane/kubeadm/config/crd/bases"
)

// covered are the CRDs compared, by file name: the same name in Capstan's
// config/crd/bases and in the upstream folder.
var covered = []struct{ file, upstreamDir string }{
	{"cluster.x-k8s.io_clusterclasses.yaml", coreCRDs},
	{"cluster.x-k8s.io_clusters.yaml", coreCRDs},
	{"cluster.x-k8s.io_machines.yaml", coreCRDs},
	{"cluster.x-k8s.io_machinesets.yaml", coreCRDs},
	{"cluster.x-k8s.io_machinedeployments.yaml", coreCRDs},
	{"cluster.x-k8s.io_machinepools.yaml", coreCRDs},
	{"cluster.x-k8s.io_machinehealthchecks.yaml", coreCRDs},
	{"bootstrap.cluster.x-k8s.io_kubeadmconfigs.yaml", bootstrapCRDs},
	{"bootstrap.cluster.x-k8s.io_kubeadmconfigtemplates.yaml", bootstrapCRDs},
	{"controlplane.cluster.x-k8s.io_kubeadmcontrolplanes.yaml", controlPlaneCRDs},
	{"controlplane.cluster.x-k8s.io_kubeadmcontrolplanetemplates.yaml", controlPlaneCRDs},
}

// allowance is a difference between Capstan's schema and upstream's that
// is deliberate: on the named facet of every field path that matches.
type allowance struct {
	facet  string
	path   *regexp.Regexp
	reason string
}

// Where the API server must refuse what upstream's admission webhooks
// refuse, Capstan (which runs no webhooks) puts the rule in the schema, and
// where upstream's webhooks fill in defaults, Capstan's schema does. Those
// are the only differences allowed; every one is listed with its reason.
var allowed = []allowance{
	{"mapType", regexp.MustCompile(`(controlPlaneRef|infrastructureRef|configRef)$`),
		"a contract-versioned reference is atomic under server-side apply, so that two managers never leave one half-rewritten (the kind of one and the name of another)"},
	{"pattern", regexp.MustCompile(`\.spec(\.template\.spec)?\.version$|\.spec\.topology\.version$`),
		"the Kubernetes version's semver shape, checked by upstream's webhooks, is a schema pattern"},
	{"pattern", regexp.MustCompile(`taints\[\]\.key$`),
		"the same key shape as upstream's, with the name part bounded at 63 characters in the pattern: upstream leaves that to the Node update, and a CEL rule for it costs more than the API server allows in topology lists"},
	{"required", regexp.MustCompile(`^\.spec$`),
		"(MachineSet, MachineDeployment) spec.selector may be left out: upstream's defaulting webhook fills it from the template's labels, Capstan's controllers do the same"},
	{"enum", regexp.MustCompile(`extraVolumes\[\]\.pathType$`),
		"the host path types, checked by kubeadm at run time upstream, are refused at admission"},
	{"pattern", regexp.MustCompile(`bootstrapTokens\[\]\.token$|bootstrapToken\.token$`),
		"the bootstrap token shape, checked by kubeadm at run time upstream, is refused at admission"},
	{"max", regexp.MustCompile(`localAPIEndpoint\.bindPort$`),
		"a port above 65535 is refused at admission instead of failing kubeadm"},
	{"min", regexp.MustCompile(`\.spec\.remediation\.maxRetry$`),
		"a negative retry count, meaningless, is refused at admission"},
	{"default", regexp.MustCompile(`^\.spec\.replicas$`),
		"(KubeadmControlPlane) upstream's defaulting webhook sets 1 replica; the schema does"},
	{"min", regexp.MustCompile(`^\.spec\.replicas$`),
		"(KubeadmControlPlane) zero or negative replicas, refused by upstream's webhook, are refused by the schema"},
	{"default", regexp.MustCompile(`\.spec(\.template\.spec)?\.rollout(\.strategy\.type)?$`),
		"(KubeadmControlPlane) upstream's defaulting webhook sets a RollingUpdate with maxSurge 1; the schema does"},
}

// facets are the parts of a field's schema compared, besides its existence.
func facets(s *apiextensionsv1.JSONSchemaProps) map[string]string {
	j := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			panic(err)
		}
		return string(b)
	}
	required := slices.Clone(s.Required)
	sort.Strings(required)
	return map[string]string{
		"type":          s.Type,
		"format":        s.Format,
		"enum":          j(s.Enum),
		"default":       j(s.Default),
		"required":      j(required),
		"min":           j(s.Minimum),
		"max":           j(s.Maximum),
		"minLength":     j(s.MinLength),
		"maxLength":     j(s.MaxLength),
		"minItems":      j(s.MinItems),
		"maxItems":      j(s.MaxItems),
		"minProperties": j(s.MinProperties),
		"maxProperties": j(s.MaxProperties),
		"pattern":       s.Pattern,
		"listType":      j(s.XListType),
		"listMapKeys":   j(s.XListMapKeys),
		"mapType":       j(s.XMapType),
		"preserve":      j(s.XPreserveUnknownFields),
		"intOrString":   fmt.Sprint(s.XIntOrString),
		"embedded":      fmt.Sprint(s.XEmbeddedResource),
	}
}

// upstreamModule is where the go.mod's sigs.k8s.io/cluster-api sits in the
// module cache.
func upstreamModule(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/cluster-api").Output()
	if err != nil {
		t.Fatalf("locating sigs.k8s.io/cluster-api in the module cache: %v", err)
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" {
		t.Fatal("sigs.k8s.io/cluster-api is not in the module cache: run go mod download in test/interop")
	}
	return dir
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

// fieldPaths maps every field path of a schema to its schema: ".a.b" for
// properties, "[]" for list items, "{}" for map values.
func fieldPaths(prefix string, s *apiextensionsv1.JSONSchemaProps, into map[string]*apiextensionsv1.JSONSchemaProps) {
	into[prefix] = s
	for name := range s.Properties {
		p := s.Properties[name]
		fieldPaths(prefix+"."+name, &p, into)
	}
	if s.Items != nil && s.Items.Schema != nil {
		fieldPaths(prefix+"[]", s.Items.Schema, into)
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		fieldPaths(prefix+"{}", s.AdditionalProperties.Schema, into)
	}
}

func allowedBecause(facet, path string) (string, bool) {
	for _, a := range allowed {
		if a.facet == facet && a.path.MatchString(path) {
			return a.reason, true
		}
	}
	return "", false
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Every kind Capstan shares with upstream Cluster API has exactly upstream's
// field paths, upstream's types, formats, enums, defaults, bounds, patterns
// and list semantics on each (but for the allowances above, each logged),
// at least upstream's CEL rules on each, and upstream's names, scope,
// subresources and printer columns.
func TestSchemaMatchesUpstream(t *testing.T) {
	up := upstreamModule(t)
	used := map[int]bool{}
	for _, c := range covered {
		t.Run(strings.TrimSuffix(c.file, ".yaml"), func(t *testing.T) {
			ours := readCRD(t, filepath.Join("..", "..", "..", "config", "crd", "bases", c.file))
			theirs := readCRD(t, filepath.Join(up, c.upstreamDir, c.file))
			ov, tv := v1beta2(t, ours), v1beta2(t, theirs)

			op, tp := map[string]*apiextensionsv1.JSONSchemaProps{}, map[string]*apiextensionsv1.JSONSchemaProps{}
			fieldPaths("", ov.Schema.OpenAPIV3Schema, op)
			fieldPaths("", tv.Schema.OpenAPIV3Schema, tp)
			for _, p := range sortedKeys(tp) {
				if _, ok := op[p]; !ok {
					t.Errorf("upstream has field %s, Capstan does not", p)
				}
			}
			for _, p := range sortedKeys(op) {
				theirsAt, ok := tp[p]
				if !ok {
					t.Errorf("Capstan has field %s, upstream does not", p)
					continue
				}
				of, tf := facets(op[p]), facets(theirsAt)
				for _, f := range sortedKeys(tf) {
					if of[f] == tf[f] {
						continue
					}
					if reason, ok := allowedBecause(f, p); ok {
						for i, a := range allowed {
							if a.facet == f && a.path.MatchString(p) {
								used[i] = true
							}
						}
						t.Logf("allowed: %s %s: Capstan %s, upstream %s: %s", p, f, of[f], tf[f], reason)
						continue
					}
					t.Errorf("%s %s: Capstan %s, upstream %s", p, f, of[f], tf[f])
				}
				// Capstan may check more than upstream's schema (what
				// upstream's webhooks check), never less.
				if n, m := len(op[p].XValidations), len(theirsAt.XValidations); n < m {
					t.Errorf("%s: Capstan has %d CEL rules, upstream %d", p, n, m)
				}
			}

			if !slices.Equal(ours.Spec.Names.ShortNames, theirs.Spec.Names.ShortNames) {
				t.Errorf("short names: Capstan %v, upstream %v", ours.Spec.Names.ShortNames, theirs.Spec.Names.ShortNames)
			}
			if !slices.Equal(ours.Spec.Names.Categories, theirs.Spec.Names.Categories) {
				t.Errorf("categories: Capstan %v, upstream %v", ours.Spec.Names.Categories, theirs.Spec.Names.Categories)
			}
			if ours.Spec.Names.Kind != theirs.Spec.Names.Kind || ours.Spec.Names.Plural != theirs.Spec.Names.Plural || ours.Spec.Scope != theirs.Spec.Scope {
				t.Errorf("names or scope: Capstan %s/%s %s, upstream %s/%s %s", ours.Spec.Names.Kind, ours.Spec.Names.Plural,
					ours.Spec.Scope, theirs.Spec.Names.Kind, theirs.Spec.Names.Plural, theirs.Spec.Scope)
			}
			if o, u := fmt.Sprintf("%+v", ov.Subresources), fmt.Sprintf("%+v", tv.Subresources); o != u {
				t.Errorf("subresources: Capstan %s, upstream %s", o, u)
			}
			column := func(c apiextensionsv1.CustomResourceColumnDefinition) string {
				return fmt.Sprintf("%s (%s, %s, priority %d)", c.Name, c.Type, c.JSONPath, c.Priority)
			}
			var oc, tc []string
			for _, c := range ov.AdditionalPrinterColumns {
				oc = append(oc, column(c))
			}
			for _, c := range tv.AdditionalPrinterColumns {
				tc = append(tc, column(c))
			}
			if !slices.Equal(oc, tc) {
				t.Errorf("printer columns:\nCapstan  %q\nupstream %q", oc, tc)
			}
		})
	}
	// An allowance that no longer matches anything is stale: drop it, so
	// that the list says exactly where Capstan differs.
	if !t.Failed() {
		for i, a := range allowed {
			if !used[i] {
				t.Errorf("allowance for %s on %s matches no difference any more: remove it", a.facet, a.path)
			}
		}
	}
}
