package describe

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata from the current output")

// now is the fixed clock of every golden tree.
var now = time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC)

func ago(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(-d)) }

func cond(t string, status metav1.ConditionStatus, reason string, age time.Duration, msg string) metav1.Condition {
	return metav1.Condition{Type: t, Status: status, Reason: reason, LastTransitionTime: ago(age), Message: msg}
}

func ucond(t, status, reason string, age time.Duration, msg string) map[string]any {
	c := map[string]any{"type": t, "status": status, "reason": reason, "lastTransitionTime": now.Add(-age).Format(time.RFC3339)}
	if msg != "" {
		c["message"] = msg
	}
	return c
}

func controller(kind, name string) []metav1.OwnerReference {
	return []metav1.OwnerReference{{APIVersion: "cluster.x-k8s.io/v1beta2", Kind: kind, Name: name, UID: types.UID("uid-" + name), Controller: ptr.To(true)}}
}

func provider(apiVersion, kind, name string, conds ...map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": map[string]any{"name": name, "namespace": "default"}}}
	if len(conds) > 0 {
		list := make([]any, len(conds))
		for i, c := range conds {
			list[i] = c
		}
		u.Object["status"] = map[string]any{"conditions": list}
	}
	return u
}

func readyMachine(name, ownerKind, owner string, age time.Duration) clusterv1.Machine {
	return clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", OwnerReferences: controller(ownerKind, owner)},
		Status: clusterv1.MachineStatus{Conditions: []metav1.Condition{
			cond(clusterv1.ReadyCondition, metav1.ConditionTrue, clusterv1.ReadyReason, age, ""),
			cond(clusterv1.UpToDateCondition, metav1.ConditionTrue, clusterv1.UpToDateReason, age, ""),
			cond(clusterv1.NodeReadyCondition, metav1.ConditionTrue, "NodeReady", age, ""),
		}},
	}
}

func int32s(vals ...int32) []*int32 {
	out := make([]*int32, len(vals))
	for i := range vals {
		out[i] = &vals[i]
	}
	return out
}

// cluster is a Cluster with controlPlane and workers counters (desired,
// current, ready, available, up to date).
func cluster(name string, cp, workers []int32, conds ...metav1.Condition) *clusterv1.Cluster {
	c := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}}
	c.Spec.InfrastructureRef = clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "LocalCluster", Name: name}
	c.Spec.ControlPlaneRef = clusterv1.ContractVersionedObjectReference{APIGroup: "controlplane.cluster.x-k8s.io", Kind: "KubeadmControlPlane", Name: name + "-control-plane"}
	p := int32s(cp...)
	c.Status.ControlPlane = &clusterv1.ClusterControlPlaneStatus{DesiredReplicas: p[0], Replicas: p[1], ReadyReplicas: p[2], AvailableReplicas: p[3], UpToDateReplicas: p[4]}
	w := int32s(workers...)
	c.Status.Workers = &clusterv1.WorkersStatus{DesiredReplicas: w[0], Replicas: w[1], ReadyReplicas: w[2], AvailableReplicas: w[3], UpToDateReplicas: w[4]}
	c.Status.Conditions = conds
	return c
}

func kcp(name string, desired, current, ready, available, upToDate int64, conds ...map[string]any) *unstructured.Unstructured {
	u := provider("controlplane.cluster.x-k8s.io/v1beta2", "KubeadmControlPlane", name, conds...)
	u.Object["spec"] = map[string]any{"replicas": desired, "version": "v1.35.8"}
	status, _ := u.Object["status"].(map[string]any)
	if status == nil {
		status = map[string]any{}
		u.Object["status"] = status
	}
	status["replicas"], status["readyReplicas"], status["availableReplicas"], status["upToDateReplicas"] = current, ready, available, upToDate
	return u
}

func machineDeployment(name string, counters []int32, conds ...metav1.Condition) clusterv1.MachineDeployment {
	c := int32s(counters...)
	return clusterv1.MachineDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec:       clusterv1.MachineDeploymentSpec{ClusterName: "demo", Replicas: c[0]},
		Status: clusterv1.MachineDeploymentStatus{Replicas: c[1], ReadyReplicas: c[2], AvailableReplicas: c[3], UpToDateReplicas: c[4],
			Conditions: conds},
	}
}

func machineSet(name, md string, counters []int32, conds ...metav1.Condition) clusterv1.MachineSet {
	c := int32s(counters...)
	return clusterv1.MachineSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", OwnerReferences: controller("MachineDeployment", md)},
		Spec:       clusterv1.MachineSetSpec{ClusterName: "demo", Replicas: c[0]},
		Status: clusterv1.MachineSetStatus{Replicas: c[1], ReadyReplicas: c[2], AvailableReplicas: c[3], UpToDateReplicas: c[4],
			Conditions: conds},
	}
}

// healthy is a cluster of one control-plane machine and two workers, all
// up for a while.
func healthy() Objects {
	const day = 24 * time.Hour
	o := Objects{
		Cluster: cluster("demo", []int32{1, 1, 1, 1, 1}, []int32{2, 2, 2, 2, 2},
			cond(clusterv1.AvailableCondition, metav1.ConditionTrue, clusterv1.AvailableReason, 2*day, ""),
			cond(clusterv1.ClusterControlPlaneAvailableCondition, metav1.ConditionTrue, clusterv1.AvailableReason, 2*day, ""),
			cond(clusterv1.ClusterWorkersAvailableCondition, metav1.ConditionTrue, clusterv1.AvailableReason, 2*day, ""),
			cond(clusterv1.PausedCondition, metav1.ConditionFalse, clusterv1.NotPausedReason, 3*day, ""),
		),
		Infrastructure: provider("infrastructure.cluster.x-k8s.io/v1beta2", "LocalCluster", "demo",
			ucond("Ready", "True", "Ready", 3*day, ""), ucond("LoadBalancerReady", "True", "Running", 3*day, "")),
		ControlPlane: kcp("demo-control-plane", 1, 1, 1, 1, 1,
			ucond("Available", "True", "Available", 2*day, ""), ucond("EtcdClusterHealthy", "True", "Healthy", 2*day, "")),
		MachineDeployments: []clusterv1.MachineDeployment{machineDeployment("demo-md-0", []int32{2, 2, 2, 2, 2},
			cond(clusterv1.AvailableCondition, metav1.ConditionTrue, clusterv1.AvailableReason, 2*day, ""))},
		MachineSets: []clusterv1.MachineSet{machineSet("demo-md-0-abcde", "demo-md-0", []int32{2, 2, 2, 2, 2},
			cond(clusterv1.MachinesReadyCondition, metav1.ConditionTrue, clusterv1.ReadyReason, 2*day, ""))},
		Machines: []clusterv1.Machine{
			readyMachine("demo-md-0-abcde-x2k9p", "MachineSet", "demo-md-0-abcde", 47*time.Hour),
			readyMachine("demo-control-plane-7fq2d", "KubeadmControlPlane", "demo-control-plane", 2*day),
			readyMachine("demo-md-0-abcde-b7n4m", "MachineSet", "demo-md-0-abcde", 2*day),
		},
		InfrastructureMachines: map[string]*unstructured.Unstructured{},
		BootstrapConfigs:       map[string]*unstructured.Unstructured{},
	}
	for _, m := range o.Machines {
		o.InfrastructureMachines[m.Name] = provider("infrastructure.cluster.x-k8s.io/v1beta2", "LocalMachine", m.Name,
			ucond("Ready", "True", "Ready", 2*day, ""))
		o.BootstrapConfigs[m.Name] = provider("bootstrap.cluster.x-k8s.io/v1beta2", "KubeadmConfig", m.Name,
			ucond("Ready", "True", "Ready", 2*day, ""), ucond("DataSecretAvailable", "True", "Available", 2*day, ""))
	}
	return o
}

// rollingOut is a 3+3 cluster in the middle of a worker rollout, with one
// new worker whose node is not ready and a control-plane machine whose
// infrastructure failed.
func rollingOut() Objects {
	o := Objects{
		Cluster: cluster("demo", []int32{3, 3, 2, 2, 3}, []int32{3, 4, 3, 3, 1},
			cond(clusterv1.AvailableCondition, metav1.ConditionTrue, clusterv1.AvailableReason, 3*time.Hour, ""),
			cond(clusterv1.ClusterWorkerMachinesReadyCondition, metav1.ConditionFalse, "NotReady", 2*time.Minute,
				"* Machine demo-md-0-new-q8w2e:\n  * NodeReady: Node demo-md-0-new-q8w2e is not ready")),
		Infrastructure: provider("infrastructure.cluster.x-k8s.io/v1beta2", "LocalCluster", "demo",
			ucond("Ready", "True", "Ready", 3*time.Hour, "")),
		ControlPlane: kcp("demo-control-plane", 3, 3, 2, 2, 3,
			ucond("Available", "True", "Available", 3*time.Hour, ""),
			ucond("MachinesReady", "False", "NotReady", 5*time.Minute, "* Machine demo-control-plane-c3: InfrastructureReady: process exited")),
		MachineDeployments: []clusterv1.MachineDeployment{machineDeployment("demo-md-0", []int32{3, 4, 3, 3, 1},
			cond(clusterv1.AvailableCondition, metav1.ConditionTrue, clusterv1.AvailableReason, 3*time.Hour, ""),
			cond(clusterv1.RollingOutCondition, metav1.ConditionTrue, clusterv1.RollingOutReason, 4*time.Minute,
				"Rolling out 3 not up-to-date replicas\n* InfrastructureMachine is not up-to-date"))},
		MachineSets: []clusterv1.MachineSet{
			machineSet("demo-md-0-old", "demo-md-0", []int32{2, 2, 2, 2, 0},
				cond(clusterv1.MachinesReadyCondition, metav1.ConditionTrue, clusterv1.ReadyReason, 3*time.Hour, "")),
			machineSet("demo-md-0-new", "demo-md-0", []int32{2, 2, 1, 1, 2},
				cond(clusterv1.MachinesReadyCondition, metav1.ConditionFalse, "NotReady", 2*time.Minute, "* Machine demo-md-0-new-q8w2e: NodeReady: Node is not ready")),
		},
		InfrastructureMachines: map[string]*unstructured.Unstructured{},
		BootstrapConfigs:       map[string]*unstructured.Unstructured{},
	}
	for _, n := range []string{"demo-control-plane-c1", "demo-control-plane-c2"} {
		o.Machines = append(o.Machines, readyMachine(n, "KubeadmControlPlane", "demo-control-plane", 3*time.Hour))
	}
	broken := readyMachine("demo-control-plane-c3", "KubeadmControlPlane", "demo-control-plane", 3*time.Hour)
	broken.Status.Conditions[0] = cond(clusterv1.ReadyCondition, metav1.ConditionFalse, "NotReady", 5*time.Minute, "* InfrastructureReady: process exited")
	o.Machines = append(o.Machines, broken)
	for _, n := range []string{"demo-md-0-old-a1", "demo-md-0-old-a2"} {
		o.Machines = append(o.Machines, readyMachine(n, "MachineSet", "demo-md-0-old", 3*time.Hour))
	}
	o.Machines = append(o.Machines, readyMachine("demo-md-0-new-k3j7s", "MachineSet", "demo-md-0-new", 3*time.Minute))
	slow := readyMachine("demo-md-0-new-q8w2e", "MachineSet", "demo-md-0-new", 2*time.Minute)
	slow.Status.Conditions[0] = cond(clusterv1.ReadyCondition, metav1.ConditionFalse, "NotReady", 2*time.Minute, "* NodeReady: Node is not ready")
	o.Machines = append(o.Machines, slow)
	// A Machine that nothing owns.
	o.Machines = append(o.Machines, clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "demo-debug", Namespace: "default"},
		Status: clusterv1.MachineStatus{Conditions: []metav1.Condition{cond(clusterv1.ReadyCondition, metav1.ConditionUnknown, "ReadyUnknown", 30*time.Second, "")}}})
	for _, m := range o.Machines {
		ready := ucond("Ready", "True", "Ready", time.Hour, "")
		if m.Name == "demo-control-plane-c3" {
			ready = ucond("Ready", "False", "ProcessExited", 5*time.Minute, "the machine's process exited; see node.log")
		}
		o.InfrastructureMachines[m.Name] = provider("infrastructure.cluster.x-k8s.io/v1beta2", "LocalMachine", m.Name, ready)
		o.BootstrapConfigs[m.Name] = provider("bootstrap.cluster.x-k8s.io/v1beta2", "KubeadmConfig", m.Name, ucond("Ready", "True", "Ready", time.Hour, ""))
	}
	return o
}

// withPool is healthy() with a MachinePool of three instances: two ready
// Machines, one whose Node is not ready yet, and an infrastructure pool
// still booting it.
func withPool() Objects {
	o := healthy()
	o.MachinePools = []clusterv1.MachinePool{{
		ObjectMeta: metav1.ObjectMeta{Name: "demo-pool", Namespace: "default"},
		Spec:       clusterv1.MachinePoolSpec{ClusterName: "demo", Replicas: ptr.To[int32](3)},
		Status: clusterv1.MachinePoolStatus{Replicas: ptr.To[int32](3), ReadyReplicas: ptr.To[int32](2), AvailableReplicas: ptr.To[int32](2),
			UpToDateReplicas: ptr.To[int32](3), Conditions: []metav1.Condition{
				cond(clusterv1.AvailableCondition, metav1.ConditionFalse, clusterv1.NotAvailableReason, time.Minute, "2 available replicas, at least 3 required"),
				cond(clusterv1.ScalingUpCondition, metav1.ConditionFalse, clusterv1.NotScalingUpReason, time.Hour, ""),
			}},
	}}
	o.InfrastructureMachinePools = map[string]*unstructured.Unstructured{
		"demo-pool": provider("infrastructure.cluster.x-k8s.io/v1beta2", "InMemoryMachinePool", "demo-pool",
			ucond("Ready", "False", "Booting", time.Minute, "2 of 3 instances booted")),
	}
	for _, n := range []string{"demo-pool-aaaaa", "demo-pool-bbbbb"} {
		o.Machines = append(o.Machines, readyMachine(n, "MachinePool", "demo-pool", time.Hour))
	}
	slow := readyMachine("demo-pool-ccccc", "MachinePool", "demo-pool", time.Minute)
	slow.Status.Conditions[0] = cond(clusterv1.ReadyCondition, metav1.ConditionFalse, "NotReady", time.Minute, "* NodeReady: Node is not ready")
	o.Machines = append(o.Machines, slow)
	return o
}

// managed is healthy() built from a ClusterClass in another namespace,
// upgrading: the control plane is at the new version and the workers wait.
func managed() Objects {
	o := healthy()
	o.Cluster.Spec.Topology = clusterv1.Topology{
		ClassRef: clusterv1.ClusterClassRef{Name: "capstan-local", Namespace: "classes"},
		Version:  "v1.35.9",
	}
	o.Cluster.Status.Conditions = append(o.Cluster.Status.Conditions,
		cond(clusterv1.ClusterTopologyReconciledCondition, metav1.ConditionFalse, clusterv1.ClusterTopologyReconciledMachineDeploymentsUpgradePendingReason, 3*time.Minute,
			"MachineDeployment(s) demo-md-0 upgrading to version v1.35.9 after the control plane"))
	return o
}

func TestGolden(t *testing.T) {
	tests := []struct {
		name    string
		objects Objects
		opts    Options
		output  string // "" for the table, or json / yaml
		color   bool
	}{
		{name: "healthy", objects: healthy(), opts: Options{Grouping: true}},
		{name: "healthy-no-grouping", objects: healthy(), opts: Options{}},
		{name: "healthy-echo", objects: healthy(), opts: Options{Grouping: true, Echo: true}},
		{name: "healthy-json", objects: healthy(), opts: Options{Grouping: true}, output: "json"},
		{name: "healthy-yaml", objects: healthy(), opts: Options{Grouping: true}, output: "yaml"},
		{name: "healthy-color", objects: healthy(), opts: Options{Grouping: true}, color: true},
		{name: "rolling", objects: rollingOut(), opts: Options{Grouping: true}},
		{name: "rolling-no-grouping", objects: rollingOut(), opts: Options{}},
		{name: "rolling-machinesets", objects: rollingOut(), opts: Options{Grouping: true, ShowMachineSets: true}},
		{name: "rolling-conditions", objects: rollingOut(), opts: Options{Grouping: true, ShowMachineSets: true,
			ShowConditions: []string{"Cluster", "MachineDeployment/demo-md-0", "machine/demo-md-0-new-q8w2e"}}},
		{name: "rolling-conditions-all", objects: rollingOut(), opts: Options{Grouping: true, ShowConditions: []string{"all"}}},
		{name: "machinepool", objects: withPool(), opts: Options{Grouping: true}},
		{name: "machinepool-conditions", objects: withPool(), opts: Options{Grouping: true, ShowConditions: []string{"mp"}}},
		{name: "topology", objects: managed(), opts: Options{Grouping: true}},
		{name: "topology-conditions", objects: managed(), opts: Options{Grouping: true, ShowConditions: []string{"Cluster"}}},
		{name: "topology-json", objects: managed(), opts: Options{Grouping: true}, output: "json"},
		{name: "missing-objects", objects: Objects{Cluster: cluster("demo", []int32{1, 0, 0, 0, 0}, []int32{0, 0, 0, 0, 0})}, opts: Options{Grouping: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tree := Build(tc.objects, tc.opts)
			var out bytes.Buffer
			var err error
			ext := ".txt"
			switch tc.output {
			case "json":
				err, ext = JSON(&out, tree), ".json"
			case "yaml":
				err, ext = YAML(&out, tree), ".yaml"
			default:
				err = Render(&out, tree, now, tc.color)
			}
			if err != nil {
				t.Fatal(err)
			}
			golden(t, filepath.Join("testdata", tc.name+ext), out.Bytes())
		})
	}
}

func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./internal/describe -update to write it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("output differs from %s (rerun with -update if the change is intended)\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// TestBuildDoesNotDependOnOrder: the API server lists in any order; the
// tree must not change with it, and Build must not reorder its input.
func TestBuildDoesNotDependOnOrder(t *testing.T) {
	o := rollingOut()
	first := o.Machines[0].Name
	var a bytes.Buffer
	if err := Render(&a, Build(o, Options{Grouping: true, ShowMachineSets: true}), now, false); err != nil {
		t.Fatal(err)
	}
	r := rollingOut()
	for i, j := 0, len(r.Machines)-1; i < j; i, j = i+1, j-1 {
		r.Machines[i], r.Machines[j] = r.Machines[j], r.Machines[i]
	}
	r.MachineSets[0], r.MachineSets[1] = r.MachineSets[1], r.MachineSets[0]
	var b bytes.Buffer
	if err := Render(&b, Build(r, Options{Grouping: true, ShowMachineSets: true}), now, false); err != nil {
		t.Fatal(err)
	}
	if a.String() != b.String() {
		t.Errorf("tree depends on list order:\n%s\nvs\n%s", a.String(), b.String())
	}
	if o.Machines[0].Name != first {
		t.Error("Build reordered its input")
	}
}

func TestGroupingCollapsesOnlySameState(t *testing.T) {
	want := "True=demo-control-plane-c1+demo-control-plane-c2 True=demo-md-0-new-k3j7s+demo-md-0-old-a1+demo-md-0-old-a2"
	if got := machineGroups(rollingOut()); got != want {
		t.Errorf("groups %s, want %s", got, want)
	}

	// Machines that share Ready but not UpToDate or Available stay apart: a
	// group would hide the one left behind.
	o := rollingOut()
	for i := range o.Machines {
		m := &o.Machines[i]
		switch m.Name {
		case "demo-md-0-old-a1", "demo-md-0-old-a2":
			m.Status.Conditions[1] = cond(clusterv1.UpToDateCondition, metav1.ConditionFalse, clusterv1.NotUpToDateReason, time.Minute, "* Version v1.35.8, v1.35.9 required")
		case "demo-control-plane-c2":
			m.Status.Conditions = append(m.Status.Conditions, cond(clusterv1.AvailableCondition, metav1.ConditionFalse, "NotAvailable", time.Minute, ""))
		}
	}
	want = "True=demo-md-0-old-a1+demo-md-0-old-a2"
	if got := machineGroups(o); got != want {
		t.Errorf("groups %s, want %s", got, want)
	}

	// Nor do Machines in another phase or at another version: an upgrade
	// shows its old and new Machines apart, each with its phase.
	o = rollingOut()
	for i := range o.Machines {
		m := &o.Machines[i]
		m.Spec.Version, m.Status.Phase = "v1.35.8", "Running"
		switch m.Name {
		case "demo-md-0-old-a1":
			m.Status.Phase = "Deleting"
		case "demo-control-plane-c2":
			m.Spec.Version = "v1.35.9"
		}
	}
	if got, want := machineGroups(o), "True=demo-md-0-new-k3j7s+demo-md-0-old-a2"; got != want {
		t.Errorf("groups %s, want %s (the Deleting one and the control plane at two versions apart)", got, want)
	}
	var phases []string
	var walk func(n *Node)
	walk = func(n *Node) {
		if n.Role == RoleMachine {
			phases = append(phases, n.Name+"="+n.Phase+"@"+n.Version)
		}
		for _, c := range n.Children {
			walk(c)
		}
	}
	walk(Build(o, Options{}))
	sort.Strings(phases)
	if got := strings.Join(phases, " "); !strings.Contains(got, "demo-md-0-old-a1=Deleting@v1.35.8") || !strings.Contains(got, "demo-control-plane-c2=Running@v1.35.9") {
		t.Errorf("Machine rows %s, want each Machine's phase and version", got)
	}
}

// machineGroups lists the MachineGroup rows of o's tree as STATUS=MEMBERS.
func machineGroups(o Objects) string {
	tree := Build(o, Options{Grouping: true})
	var groups []string
	var walk func(n *Node)
	walk = func(n *Node) {
		if n.Role == RoleMachineGroup {
			groups = append(groups, fmt.Sprintf("%s=%s", n.Status.Status, strings.Join(n.Machines, "+")))
		}
		for _, c := range n.Children {
			walk(c)
		}
	}
	walk(tree)
	return strings.Join(groups, " ")
}

// A Cluster whose class is in its own namespace names the class with it;
// one that has not reported TopologyReconciled yet still shows its class.
func TestTopologyRow(t *testing.T) {
	o := healthy()
	o.Cluster.Spec.Topology = clusterv1.Topology{ClassRef: clusterv1.ClusterClassRef{Name: "capstan-local"}, Version: "v1.35.8"}
	tree := Build(o, Options{Grouping: true, ShowConditions: []string{"all"}})
	top := tree.Children[0]
	if top.Role != RoleTopology || Label(top) != "Topology - ClusterClass/default/capstan-local, v1.35.8" || top.Status != nil {
		t.Errorf("first row %q (role %s, status %+v), want the class default/capstan-local at v1.35.8 with no condition yet", Label(top), top.Role, top.Status)
	}
	for _, c := range tree.Conditions {
		if c.Type == clusterv1.ClusterTopologyReconciledCondition {
			t.Error("TopologyReconciled listed among the Cluster's own conditions")
		}
	}
	// A Cluster without a topology has no such row.
	for _, n := range Build(healthy(), Options{}).Children {
		if n.Role == RoleTopology {
			t.Error("a Cluster without spec.topology got a Topology row")
		}
	}
}

func TestParseShowConditions(t *testing.T) {
	for in, want := range map[string]string{
		"":                                "",
		"all":                             "all",
		"Machine, KubeadmControlPlane/cp": "Machine|KubeadmControlPlane/cp",
	} {
		got, err := ParseShowConditions(in)
		if err != nil || strings.Join(got, "|") != want {
			t.Errorf("ParseShowConditions(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{",", "Machine/", "/name", "a/b/c", "Machine,,Cluster"} {
		if _, err := ParseShowConditions(bad); err == nil {
			t.Errorf("ParseShowConditions(%q) accepted", bad)
		}
	}
}

func TestShowConditionsMatches(t *testing.T) {
	for _, tc := range []struct {
		items      []string
		kind, name string
		want       bool
	}{
		{[]string{"all"}, "Machine", "m1", true},
		{[]string{"machine"}, "Machine", "m1", true},
		{[]string{"Machine/m2"}, "Machine", "m1", false},
		{[]string{"Machine/m1"}, "Machine", "m1", true},
		{[]string{"kcp"}, "KubeadmControlPlane", "cp", true},
		{[]string{"md/demo-md-0"}, "MachineDeployment", "demo-md-0", true},
		{[]string{"md/demo-md-0"}, "MachineSet", "demo-md-0", false},
		{nil, "Cluster", "demo", false},
	} {
		if got := (Options{ShowConditions: tc.items}).showConditionsOf(tc.kind, tc.name); got != tc.want {
			t.Errorf("%v on %s/%s: %v, want %v", tc.items, tc.kind, tc.name, got, tc.want)
		}
	}
}
