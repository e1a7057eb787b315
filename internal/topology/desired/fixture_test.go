package desired_test

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/topology/desired"
)

// quickStart loads testdata/quick-start.yaml: the class, its templates and
// the Cluster, as a first reconcile's input (nothing exists yet), with a
// known sequence of random suffixes.
func quickStart(t *testing.T) desired.Input {
	t.Helper()
	raw, err := os.ReadFile("testdata/quick-start.yaml")
	if err != nil {
		t.Fatal(err)
	}
	in := desired.Input{ClassTemplates: map[desired.TemplateKey]*unstructured.Unstructured{}, Random: sequence()}
	decoder := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := decoder.Decode(&u.Object); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		switch u.GetKind() {
		case clusterv1.ClusterClassKind:
			in.Class = &clusterv1.ClusterClass{}
			convert(t, u, in.Class)
		case clusterv1.ClusterKind:
			in.Cluster = &clusterv1.Cluster{}
			convert(t, u, in.Cluster)
		default:
			key := desired.TemplateKey{Group: u.GroupVersionKind().Group, Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName()}
			in.ClassTemplates[key] = u
		}
	}
	return in
}

func convert(t *testing.T, u *unstructured.Unstructured, into any) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, into); err != nil {
		t.Fatal(err)
	}
}

// sequence gives r0001, r0002, ... (five characters, as the generator's).
func sequence() func(int) string {
	n := 0
	return func(length int) string {
		n++
		s := fmt.Sprintf("r%04d", n)
		if length != len(s) {
			panic("random suffixes are five characters")
		}
		return s
	}
}

// asCurrent is what the API server would hold after the state was applied:
// the same objects, with the server's additions (a uid, defaults in a
// template's spec) that must not count as changes.
func asCurrent(s *desired.State) desired.Current {
	withServerFields := func(u *unstructured.Unstructured) *unstructured.Unstructured {
		if u == nil {
			return nil
		}
		c := u.DeepCopy()
		c.SetUID("33333333-0000-0000-0000-000000000003")
		c.SetResourceVersion("42")
		if strings.HasSuffix(c.GetKind(), "Template") {
			_ = unstructured.SetNestedField(c.Object, "defaulted-by-server", "spec", "template", "spec", "serverDefault")
		}
		return c
	}
	cur := desired.Current{
		InfrastructureCluster:             withServerFields(s.InfrastructureCluster),
		ControlPlane:                      withServerFields(s.ControlPlane),
		ControlPlaneMachineInfrastructure: withServerFields(s.ControlPlaneMachineInfrastructure),
		ControlPlaneHealthCheck:           s.ControlPlaneHealthCheck,
		MachineDeployments:                map[string]*desired.MachineDeployment{},
		MachinePools:                      map[string]*desired.MachinePool{},
	}
	// The control plane reports the version it runs: it is stable.
	if cur.ControlPlane != nil {
		v, _, _ := unstructured.NestedString(cur.ControlPlane.Object, "spec", "version")
		_ = unstructured.SetNestedField(cur.ControlPlane.Object, v, "status", "version")
	}
	for name, md := range s.MachineDeployments {
		cur.MachineDeployments[name] = &desired.MachineDeployment{
			Object:         md.Object.DeepCopy(),
			Bootstrap:      withServerFields(md.Bootstrap),
			Infrastructure: withServerFields(md.Infrastructure),
			HealthCheck:    md.HealthCheck,
		}
	}
	for name, mp := range s.MachinePools {
		cur.MachinePools[name] = &desired.MachinePool{
			Object:         mp.Object.DeepCopy(),
			Bootstrap:      withServerFields(mp.Bootstrap),
			Infrastructure: withServerFields(mp.Infrastructure),
		}
	}
	return cur
}

func nested(t *testing.T, u *unstructured.Unstructured, path ...string) any {
	t.Helper()
	v, found, err := unstructured.NestedFieldNoCopy(u.Object, path...)
	if err != nil {
		t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
	}
	if !found {
		return nil
	}
	return v
}

func apiextJSON(raw string) apiextensionsv1.JSON { return apiextensionsv1.JSON{Raw: []byte(raw)} }
