package desired_test

import (
	"context"
	"os"
	"sync"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/testenv"
	"capstan.dev/capstan/internal/topology/desired"
)

// The management plane is started by the first test that needs it only:
// the rest of the package is pure and runs without one.
var (
	planeOnce sync.Once
	plane     *testenv.Env
	planeErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if plane != nil {
		plane.Stop()
	}
	os.Exit(code)
}

func managementPlane(t *testing.T) *testenv.Env {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a management plane")
	}
	planeOnce.Do(func() { plane, planeErr = testenv.Start() })
	if planeErr != nil {
		t.Fatal(planeErr)
	}
	return plane
}

const fieldManager = "desired-test"

// Every object of the computed state is accepted by the API server with
// Capstan's CRDs (field names, types and validation rules), and computing
// again from what the server stored (its defaults, managed fields) keeps
// every name: no template is rotated by the server's own additions.
func TestStateIsAcceptedAndStableAgainstTheAPIServer(t *testing.T) {
	env := managementPlane(t)
	ctx := context.Background()
	c := env.Client
	ns := env.Namespace(t)

	in := inNamespace(t, quickStart(t), ns)
	cluster := in.Cluster.DeepCopy()
	cluster.Spec.Topology.ClassRef.Namespace = ""
	if err := c.Create(ctx, cluster); err != nil {
		t.Fatalf("creating the Cluster: %v", err)
	}
	in.Cluster = cluster // its uid owns the templates and health checks
	in.FieldManager = fieldManager
	first := compute(t, in)
	apply(t, c, first)

	in.Cluster = first.Cluster
	in.Current = read(t, c, first)
	in.Random = sequence()
	second := compute(t, in)
	for what, names := range map[string][2]string{
		"control plane machine template": {first.ControlPlaneMachineInfrastructure.GetName(), second.ControlPlaneMachineInfrastructure.GetName()},
		"md-0 bootstrap template":        {first.MachineDeployments["md-0"].Bootstrap.GetName(), second.MachineDeployments["md-0"].Bootstrap.GetName()},
		"md-0 infrastructure template":   {first.MachineDeployments["md-0"].Infrastructure.GetName(), second.MachineDeployments["md-0"].Infrastructure.GetName()},
		"gpu bootstrap template":         {first.MachineDeployments["gpu"].Bootstrap.GetName(), second.MachineDeployments["gpu"].Bootstrap.GetName()},
		"gpu infrastructure template":    {first.MachineDeployments["gpu"].Infrastructure.GetName(), second.MachineDeployments["gpu"].Infrastructure.GetName()},
		"mp-0":                           {first.MachinePools["mp-0"].Object.Name, second.MachinePools["mp-0"].Object.Name},
	} {
		if names[0] != names[1] {
			t.Errorf("%s renamed from %s to %s by a recompute from the server's copy", what, names[0], names[1])
		}
	}
	// A value the patches change does rotate.
	setVariable(&in, "kubeletLogLevel", "2")
	in.Random = sequence()
	third := compute(t, in)
	if third.MachineDeployments["md-0"].Bootstrap.GetName() == first.MachineDeployments["md-0"].Bootstrap.GetName() {
		t.Error("md-0's bootstrap template kept its name although its spec changed")
	}
	apply(t, c, third)
}

// inNamespace moves the fixture to namespace ns.
func inNamespace(t *testing.T, in desired.Input, ns string) desired.Input {
	t.Helper()
	in.Class.Namespace = ns
	in.Cluster.Namespace = ns
	in.Cluster.UID = ""
	templates := map[desired.TemplateKey]*unstructured.Unstructured{}
	for key, tmpl := range in.ClassTemplates {
		key.Namespace = ns
		tmpl.SetNamespace(ns)
		templates[key] = tmpl
	}
	in.ClassTemplates = templates
	return in
}

// apply server-side applies every object of the state, as the topology
// controller does.
func apply(t *testing.T, c client.Client, s *desired.State) {
	t.Helper()
	var objects []client.Object
	objects = append(objects, s.InfrastructureCluster, s.ControlPlaneMachineInfrastructure, s.ControlPlane, s.ControlPlaneHealthCheck)
	for _, md := range s.MachineDeployments {
		objects = append(objects, md.Bootstrap, md.Infrastructure, md.Object)
		if md.HealthCheck != nil {
			objects = append(objects, md.HealthCheck)
		}
	}
	for _, mp := range s.MachinePools {
		objects = append(objects, mp.Bootstrap, mp.Infrastructure, mp.Object)
	}
	for _, obj := range objects {
		u := &unstructured.Unstructured{}
		raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			t.Fatal(err)
		}
		u.Object = raw
		unstructured.RemoveNestedField(u.Object, "status")
		unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
		if err := c.Patch(context.Background(), u, client.Apply, client.FieldOwner(fieldManager), client.ForceOwnership); err != nil {
			t.Errorf("applying %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
}

// read is the state as the server stored it.
func read(t *testing.T, c client.Client, s *desired.State) desired.Current {
	t.Helper()
	get := func(u *unstructured.Unstructured) *unstructured.Unstructured {
		if u == nil {
			return nil
		}
		out := &unstructured.Unstructured{}
		out.SetGroupVersionKind(u.GroupVersionKind())
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(u), out); apierrors.IsNotFound(err) {
			return nil
		} else if err != nil {
			t.Fatal(err)
		}
		return out
	}
	cur := desired.Current{
		InfrastructureCluster:             get(s.InfrastructureCluster),
		ControlPlane:                      get(s.ControlPlane),
		ControlPlaneMachineInfrastructure: get(s.ControlPlaneMachineInfrastructure),
		MachineDeployments:                map[string]*desired.MachineDeployment{},
		MachinePools:                      map[string]*desired.MachinePool{},
	}
	for name, md := range s.MachineDeployments {
		obj := &clusterv1.MachineDeployment{}
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(md.Object), obj); err != nil {
			t.Fatal(err)
		}
		cur.MachineDeployments[name] = &desired.MachineDeployment{Object: obj, Bootstrap: get(md.Bootstrap), Infrastructure: get(md.Infrastructure)}
	}
	for name, mp := range s.MachinePools {
		obj := &clusterv1.MachinePool{}
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(mp.Object), obj); err != nil {
			t.Fatal(err)
		}
		cur.MachinePools[name] = &desired.MachinePool{Object: obj, Bootstrap: get(mp.Bootstrap), Infrastructure: get(mp.Infrastructure)}
	}
	return cur
}
