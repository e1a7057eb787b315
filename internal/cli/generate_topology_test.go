package cli

import (
	"context"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/topology/desired"
)

// topologyInput is the desired-state input of a generated topology
// manifest: its class, the class's templates and its Cluster, as a first
// reconcile sees them (nothing made yet).
func topologyInput(t *testing.T, manifest string) desired.Input {
	t.Helper()
	in := desired.Input{ClassTemplates: map[desired.TemplateKey]*unstructured.Unstructured{}}
	for _, u := range decodeManifest(t, manifest) {
		var into any
		switch u.GetKind() {
		case clusterv1.ClusterClassKind:
			in.Class = &clusterv1.ClusterClass{}
			into = in.Class
		case clusterv1.ClusterKind:
			in.Cluster = &clusterv1.Cluster{}
			into = in.Cluster
		default:
			key := desired.TemplateKey{Group: u.GroupVersionKind().Group, Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName()}
			in.ClassTemplates[key] = u
			continue
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, into); err != nil {
			t.Fatalf("%s does not decode: %v", u.GetKind(), err)
		}
	}
	if in.Class == nil || in.Cluster == nil {
		t.Fatalf("the manifest lacks a ClusterClass or a Cluster:\n%s", manifest)
	}
	return in
}

// stateObjects lists every object of a computed state, as the topology
// controller would apply them.
func stateObjects(s *desired.State) []client.Object {
	objs := []client.Object{s.InfrastructureCluster, s.ControlPlaneMachineInfrastructure, s.ControlPlane}
	if s.ControlPlaneHealthCheck != nil {
		objs = append(objs, s.ControlPlaneHealthCheck)
	}
	for _, md := range s.MachineDeployments {
		objs = append(objs, md.Bootstrap, md.Infrastructure, md.Object)
		if md.HealthCheck != nil {
			objs = append(objs, md.HealthCheck)
		}
	}
	return objs
}

// nested reads a field of an object of the state, "" when absent.
func nested(t *testing.T, u *unstructured.Unstructured, path ...string) string {
	t.Helper()
	v, found, err := unstructured.NestedFieldNoCopy(u.Object, path...)
	if err != nil || !found {
		return ""
	}
	return toString(v)
}

// kubeletArgs are the kubeletExtraArgs of a KubeadmConfigTemplate's
// joinConfiguration as name=value.
func kubeletArgs(t *testing.T, u *unstructured.Unstructured) string {
	t.Helper()
	args, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "joinConfiguration", "nodeRegistration", "kubeletExtraArgs")
	var out []string
	for _, a := range args {
		m, _ := a.(map[string]any)
		out = append(out, toString(m["name"])+"="+toString(m["value"]))
	}
	return strings.Join(out, " ")
}

func setTopologyVariable(vars []clusterv1.ClusterVariable, name, value string) []clusterv1.ClusterVariable {
	for i := range vars {
		if vars[i].Name == name {
			vars[i].Value = apiextensionsv1.JSON{Raw: []byte(value)}
			return vars
		}
	}
	return append(vars, clusterv1.ClusterVariable{Name: name, Value: apiextensionsv1.JSON{Raw: []byte(value)}})
}

// The topology flavor of each provider: its output applies to a real API
// server, applying it again changes nothing, and the class's patches apply
// cleanly through desired.Compute for the generated Cluster (with a second
// MachineDeployment of the other worker class and variables changed), giving
// objects the API server accepts (server-side apply, dry run); describe
// cluster shows the Cluster's class and its TopologyReconciled condition.
func TestGeneratedTopologyAppliesAndComputes(t *testing.T) {
	isolateTemplateVariables(t)
	ctx := context.Background()
	c := env.Client
	for _, infrastructure := range []string{"local", "in-memory"} {
		t.Run(infrastructure, func(t *testing.T) {
			ns := env.Namespace(t)
			out, _, err := runCapstan(t, "generate", "cluster", "topo", "--infrastructure", infrastructure, "--flavor", "topology",
				"-n", ns, "--kubernetes-version", "v1.35.8", "--control-plane-machine-count", "3", "--worker-machine-count", "4")
			if err != nil {
				t.Fatal(err)
			}
			if err := applyManifests(ctx, c, out); err != nil {
				t.Fatalf("the API server refuses the %s topology flavor: %v", infrastructure, err)
			}
			in := topologyInput(t, out)
			class := &clusterv1.ClusterClass{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(in.Class), class); err != nil {
				t.Fatal(err)
			}
			// A second Cluster in the same namespace applies the class again:
			// nothing changes.
			second, _, err := runCapstan(t, "generate", "cluster", "topo-2", "--infrastructure", infrastructure, "--flavor", "topology", "-n", ns)
			if err != nil {
				t.Fatal(err)
			}
			if err := applyManifests(ctx, c, second); err != nil {
				t.Fatal(err)
			}
			again := &clusterv1.ClusterClass{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(in.Class), again); err != nil {
				t.Fatal(err)
			}
			if again.ResourceVersion != class.ResourceVersion {
				t.Errorf("applying the class again wrote it (resourceVersion %s to %s)", class.ResourceVersion, again.ResourceVersion)
			}

			cluster := &clusterv1.Cluster{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(in.Cluster), cluster); err != nil {
				t.Fatal(err)
			}
			topo := cluster.Spec.Topology
			if topo.ClassRef.Name != in.Class.Name || topo.Version != "v1.35.8" || ptr.Deref(topo.ControlPlane.Replicas, 0) != 3 ||
				len(topo.Workers.MachineDeployments) != 1 || ptr.Deref(topo.Workers.MachineDeployments[0].Replicas, 0) != 4 {
				t.Errorf("stored topology %+v: want class %s, version v1.35.8, 3 control-plane machines, one MachineDeployment of 4", topo, in.Class.Name)
			}

			// describe cluster shows the class and, once the topology
			// controller reports it, the TopologyReconciled condition.
			cluster.Status.Conditions = []metav1.Condition{{Type: clusterv1.ClusterTopologyReconciledCondition, Status: metav1.ConditionFalse,
				Reason: clusterv1.ClusterTopologyReconciledClusterCreatingReason, Message: "creating the topology's objects", LastTransitionTime: metav1.Now()}}
			if err := c.Status().Update(ctx, cluster); err != nil {
				t.Fatal(err)
			}
			described, _, err := runCapstan(t, "describe", "cluster", "topo", "-n", ns, "--kubeconfig", envKubeconfig())
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(described, "Topology - ClusterClass/"+ns+"/"+in.Class.Name+", v1.35.8") ||
				!strings.Contains(described, "TopologyReconciled: False") || !strings.Contains(described, "creating the topology's objects") {
				t.Errorf("describe cluster does not show the class and the TopologyReconciled condition:\n%s", described)
			}

			// The stored Cluster (its uid owns the cloned templates), with a
			// dedicated MachineDeployment whose labels override the Cluster's.
			in.Cluster = cluster
			cluster.Spec.Topology.Variables = setTopologyVariable(cluster.Spec.Topology.Variables, "apiServerProfiling", "true")
			cluster.Spec.Topology.Variables = setTopologyVariable(cluster.Spec.Topology.Variables, "workerNodeLabels", `{"tier":"general"}`)
			cluster.Spec.Topology.Workers.MachineDeployments = append(cluster.Spec.Topology.Workers.MachineDeployments, clusterv1.MachineDeploymentTopology{
				Class: "dedicated-worker", Name: "db", Replicas: ptr.To[int32](1),
				Variables: clusterv1.MachineDeploymentVariables{Overrides: []clusterv1.ClusterVariable{
					{Name: "workerNodeLabels", Value: apiextensionsv1.JSON{Raw: []byte(`{"tier":"db"}`)}},
				}},
			})
			state, err := desired.Compute(in)
			if err != nil {
				t.Fatalf("desired.Compute: %v", err)
			}
			for _, check := range []struct{ what, got, want string }{
				{"control plane maxSurge", nested(t, state.ControlPlane, "spec", "rollout", "strategy", "rollingUpdate", "maxSurge"), "1"},
				{"control plane replicas", nested(t, state.ControlPlane, "spec", "replicas"), "3"},
				{"API server extraArgs", toString(mustNested(t, state.ControlPlane, "spec", "kubeadmConfigSpec", "clusterConfiguration", "apiServer", "extraArgs")), "[map[name:profiling value:true]]"},
				{"md-0 kubelet args", kubeletArgs(t, state.MachineDeployments["md-0"].Bootstrap), "node-labels=capstan.dev/worker-class=default-worker,tier=general"},
				{"db kubelet args", kubeletArgs(t, state.MachineDeployments["db"].Bootstrap), "node-labels=capstan.dev/worker-class=dedicated-worker,tier=db"},
				{"db taint", toString(mustNested(t, state.MachineDeployments["db"].Bootstrap, "spec", "template", "spec", "joinConfiguration", "nodeRegistration", "taints")),
					"[map[effect:NoSchedule key:capstan.dev/dedicated value:db]]"},
				{"md-0 taints", nested(t, state.MachineDeployments["md-0"].Bootstrap, "spec", "template", "spec", "joinConfiguration", "nodeRegistration", "taints"), ""},
			} {
				if check.got != check.want {
					t.Errorf("%s = %q, want %q", check.what, check.got, check.want)
				}
			}
			if infrastructure == "in-memory" {
				if got := nested(t, state.InfrastructureCluster, "spec", "delays", "machine"); got != "10s" {
					t.Errorf("InMemoryCluster delays.machine = %q, want the variable's 10s", got)
				}
			}
			for _, obj := range stateObjects(state) {
				if err := c.Patch(ctx, obj, client.Apply, client.DryRunAll, client.FieldOwner("topology-test"), client.ForceOwnership); err != nil {
					t.Errorf("the API server refuses the computed %s %s: %v", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), err)
				}
			}

			// Below v1.30 the profiling patch is off (enabledIf on
			// builtin.controlPlane.version).
			cluster.Spec.Topology.Version = "v1.29.4"
			old, err := desired.Compute(in)
			if err != nil {
				t.Fatalf("desired.Compute at v1.29.4: %v", err)
			}
			if got := nested(t, old.ControlPlane, "spec", "kubeadmConfigSpec", "clusterConfiguration", "apiServer", "extraArgs"); got != "" {
				t.Errorf("a v1.29 control plane got API server extraArgs %s", got)
			}
		})
	}
}

func mustNested(t *testing.T, u *unstructured.Unstructured, path ...string) any {
	t.Helper()
	v, found, err := unstructured.NestedFieldNoCopy(u.Object, path...)
	if err != nil || !found {
		t.Errorf("%s %s has no %s", u.GetKind(), u.GetName(), strings.Join(path, "."))
		return nil
	}
	return v
}
