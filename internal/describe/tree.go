package describe

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/contract"
)

// Objects are what a tree is built from: a Cluster and the objects of its
// namespace that belong to it, as read from the API server.
type Objects struct {
	Cluster *clusterv1.Cluster
	// Infrastructure is the object the Cluster's infrastructureRef names;
	// nil when it does not exist (the tree says so).
	Infrastructure *unstructured.Unstructured
	// ControlPlane is the object the Cluster's controlPlaneRef names; nil
	// when it does not exist or the Cluster names none.
	ControlPlane       *unstructured.Unstructured
	MachineDeployments []clusterv1.MachineDeployment
	MachineSets        []clusterv1.MachineSet
	MachinePools       []clusterv1.MachinePool
	Machines           []clusterv1.Machine
	// InfrastructureMachinePools are the objects the MachinePools'
	// spec.template.spec.infrastructureRef names, by MachinePool name.
	InfrastructureMachinePools map[string]*unstructured.Unstructured
	// InfrastructureMachines and BootstrapConfigs are the provider objects
	// of the Machines, by Machine name; a Machine may have none.
	InfrastructureMachines map[string]*unstructured.Unstructured
	BootstrapConfigs       map[string]*unstructured.Unstructured
}

// Options choose how much of the tree is shown.
type Options struct {
	// ShowConditions lists the objects whose every condition is shown, not
	// only the summary: "all", a kind ("Machine", case-insensitive, or a
	// short name such as kcp or md) or a kind and a name
	// ("MachineDeployment/demo-md-0").
	ShowConditions []string
	// ShowMachineSets puts each MachineDeployment's MachineSets between it
	// and its Machines.
	ShowMachineSets bool
	// Grouping collapses sibling Machines in the same state into one row.
	Grouping bool
	// Echo shows a Machine's infrastructure machine and bootstrap config
	// also when their state is the Machine's own.
	Echo bool
}

// Roles say where a node sits in the tree.
const (
	RoleCluster = "Cluster"
	// RoleTopology stands for a managed Cluster's spec.topology: the
	// ClusterClass it is built from (Name is namespace/name), the version
	// it is taken to and the Cluster's TopologyReconciled condition.
	RoleTopology              = "Topology"
	RoleClusterInfrastructure = "ClusterInfrastructure"
	RoleControlPlane          = "ControlPlane"
	RoleWorkers               = "Workers"
	RoleOther                 = "Other"
	RoleMachineDeployment     = "MachineDeployment"
	RoleMachineSet            = "MachineSet"
	RoleMachinePool           = "MachinePool"
	// RoleMachinePoolInfrastructure is a MachinePool's infrastructure
	// pool (an InMemoryMachinePool, an AWSMachinePool).
	RoleMachinePoolInfrastructure = "MachinePoolInfrastructure"
	RoleMachine                   = "Machine"
	RoleMachineGroup              = "MachineGroup"
	RoleMachineInfrastructure     = "MachineInfrastructure"
	RoleBootstrapConfig           = "BootstrapConfig"
)

// Node is one row of the tree and the rows below it. Workers and Other are
// rows of their own that stand for no object.
type Node struct {
	Role string `json:"role"`
	Kind string `json:"kind,omitempty"`
	Name string `json:"name,omitempty"`
	// Version is the Kubernetes version a Topology row's Cluster is taken
	// to (spec.topology.version), or a Machine's (spec.version): in an
	// upgrade it tells the old Machines from the new.
	Version string `json:"version,omitempty"`
	// Phase is a Machine's or MachinePool's status.phase (Provisioning,
	// Running, Deleting, …): where it is in its life, which conditions
	// alone do not say at a glance.
	Phase string `json:"phase,omitempty"`
	// Replicas are the object's replica counters, for objects that have
	// replicas.
	Replicas *Replicas `json:"replicas,omitempty"`
	// Status is the condition that sums the object up: Available for the
	// Cluster, its control plane and MachineDeployments, MachinesReady for
	// MachineSets, Ready for the rest.
	Status *Condition `json:"status,omitempty"`
	// Conditions are the object's other conditions, when Options asked for
	// them.
	Conditions []Condition `json:"conditions,omitempty"`
	// Machines are the names of the Machines a MachineGroup row stands for.
	Machines []string `json:"machines,omitempty"`
	Children []*Node  `json:"children,omitempty"`

	expanded bool // ShowConditions named it: never grouped away
	// alsoSame is what else Machines must share, besides Status, to be
	// grouped: whether they are Available and UpToDate. Ready alone would
	// hide a Machine stuck out of date among its Ready siblings.
	alsoSame string
}

// Replicas are an object's replica counters; nil where it reports none.
type Replicas struct {
	Desired   *int32 `json:"desired,omitempty"`
	Current   *int32 `json:"current,omitempty"`
	Available *int32 `json:"available,omitempty"`
	Ready     *int32 `json:"ready,omitempty"`
	UpToDate  *int32 `json:"upToDate,omitempty"`
}

// Condition is a condition as the tree shows it.
type Condition struct {
	Type               string    `json:"type"`
	Status             string    `json:"status"`
	Reason             string    `json:"reason,omitempty"`
	Message            string    `json:"message,omitempty"`
	LastTransitionTime time.Time `json:"lastTransitionTime,omitzero"`
}

// ParseShowConditions reads the --show-conditions value: a comma-separated
// list of "all", KIND and KIND/NAME.
func ParseShowConditions(s string) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []string
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		kind, name, hasName := strings.Cut(item, "/")
		if kind == "" || (hasName && (name == "" || strings.Contains(name, "/"))) {
			return nil, fmt.Errorf("--show-conditions %q: each item is \"all\", a kind such as Machine, or kind/name such as MachineDeployment/demo-md-0", s)
		}
		out = append(out, item)
	}
	return out, nil
}

// shortKinds are the kubectl short names of the kinds in a tree.
var shortKinds = map[string]string{"kcp": "KubeadmControlPlane", "md": "MachineDeployment", "ms": "MachineSet", "mp": "MachinePool", "lc": "LocalCluster"}

func (o Options) showConditionsOf(kind, name string) bool {
	for _, item := range o.ShowConditions {
		if strings.EqualFold(item, "all") {
			return true
		}
		k, n, hasName := strings.Cut(item, "/")
		if long, ok := shortKinds[strings.ToLower(k)]; ok {
			k = long
		}
		if strings.EqualFold(k, kind) && (!hasName || n == name) {
			return true
		}
	}
	return false
}

// Build makes the tree of o.Cluster.
func Build(o Objects, opts Options) *Node {
	o = sorted(o)
	c := o.Cluster
	root := &Node{Role: RoleCluster, Kind: "Cluster", Name: c.Name, Replicas: clusterReplicas(c)}
	conditions := fromTyped(c.Status.Conditions)
	if c.Spec.Topology.IsDefined() {
		// TopologyReconciled is shown on the Topology row, not again among
		// the Cluster's own conditions.
		var topology []Condition
		conditions = slices.DeleteFunc(conditions, func(cond Condition) bool {
			if cond.Type == clusterv1.ClusterTopologyReconciledCondition {
				topology = append(topology, cond)
				return true
			}
			return false
		})
		root.Children = append(root.Children, topologyNode(c, topology, opts))
	}
	setConditions(root, conditions, clusterv1.AvailableCondition, opts)

	if o.Infrastructure != nil {
		root.Children = append(root.Children, providerNode(RoleClusterInfrastructure, o.Infrastructure, clusterv1.ReadyCondition, opts))
	} else if ref := c.Spec.InfrastructureRef; ref.Name != "" {
		root.Children = append(root.Children, missingNode(RoleClusterInfrastructure, ref.Kind, ref.Name, clusterv1.ReadyCondition))
	}

	claimed := map[string]bool{}
	machinesOf := func(owned func(*clusterv1.Machine) bool) []*Node {
		var nodes []*Node
		for i := range o.Machines {
			m := &o.Machines[i]
			if !claimed[m.Name] && owned(m) {
				claimed[m.Name] = true
				nodes = append(nodes, machineNode(m, o, opts))
			}
		}
		return nodes
	}

	if cp := o.ControlPlane; cp != nil {
		n := providerNode(RoleControlPlane, cp, clusterv1.AvailableCondition, opts)
		if r, err := contract.Replicas(cp); err == nil && (r.Desired != nil || r.Current != nil) {
			n.Replicas = &Replicas{Desired: r.Desired, Current: r.Current, Available: r.Available, Ready: r.Ready, UpToDate: r.UpToDate}
		}
		n.Children = append(n.Children, machinesOf(func(m *clusterv1.Machine) bool {
			return controlledBy(m, cp.GetKind(), cp.GetName()) || m.Labels[clusterv1.MachineControlPlaneNameLabel] == cp.GetName()
		})...)
		root.Children = append(root.Children, n)
	} else if ref := c.Spec.ControlPlaneRef; ref.Name != "" {
		root.Children = append(root.Children, missingNode(RoleControlPlane, ref.Kind, ref.Name, clusterv1.AvailableCondition))
	}

	workers := &Node{Role: RoleWorkers}
	for i := range o.MachineDeployments {
		md := &o.MachineDeployments[i]
		n := &Node{Role: RoleMachineDeployment, Kind: "MachineDeployment", Name: md.Name, Replicas: &Replicas{
			Desired: md.Spec.Replicas, Current: md.Status.Replicas, Available: md.Status.AvailableReplicas,
			Ready: md.Status.ReadyReplicas, UpToDate: md.Status.UpToDateReplicas,
		}}
		setConditions(n, fromTyped(md.Status.Conditions), clusterv1.AvailableCondition, opts)
		var sets []*clusterv1.MachineSet
		for j := range o.MachineSets {
			ms := &o.MachineSets[j]
			if controlledBy(ms, "MachineDeployment", md.Name) || (metav1.GetControllerOf(ms) == nil && ms.Labels[clusterv1.MachineDeploymentNameLabel] == md.Name) {
				sets = append(sets, ms)
			}
		}
		inSet := func(ms *clusterv1.MachineSet) func(*clusterv1.Machine) bool {
			return func(m *clusterv1.Machine) bool {
				return controlledBy(m, "MachineSet", ms.Name) || (metav1.GetControllerOf(m) == nil && m.Labels[clusterv1.MachineSetNameLabel] == ms.Name)
			}
		}
		if opts.ShowMachineSets {
			for _, ms := range sets {
				sn := &Node{Role: RoleMachineSet, Kind: "MachineSet", Name: ms.Name, Replicas: &Replicas{
					Desired: ms.Spec.Replicas, Current: ms.Status.Replicas, Available: ms.Status.AvailableReplicas,
					Ready: ms.Status.ReadyReplicas, UpToDate: ms.Status.UpToDateReplicas,
				}}
				setConditions(sn, fromTyped(ms.Status.Conditions), clusterv1.MachinesReadyCondition, opts)
				sn.Children = machinesOf(inSet(ms))
				n.Children = append(n.Children, sn)
			}
		}
		n.Children = append(n.Children, machinesOf(func(m *clusterv1.Machine) bool {
			for _, ms := range sets {
				if inSet(ms)(m) {
					return true
				}
			}
			return m.Labels[clusterv1.MachineDeploymentNameLabel] == md.Name
		})...)
		workers.Children = append(workers.Children, n)
	}
	for i := range o.MachinePools {
		mp := &o.MachinePools[i]
		n := &Node{Role: RoleMachinePool, Kind: "MachinePool", Name: mp.Name, Phase: mp.Status.Phase, Replicas: &Replicas{
			Desired: mp.Spec.Replicas, Current: mp.Status.Replicas, Available: mp.Status.AvailableReplicas,
			Ready: mp.Status.ReadyReplicas, UpToDate: mp.Status.UpToDateReplicas,
		}}
		setConditions(n, fromTyped(mp.Status.Conditions), clusterv1.AvailableCondition, opts)
		// The infrastructure pool shows when it has something to say that
		// the MachinePool's own state does not.
		if infra := o.InfrastructureMachinePools[mp.Name]; infra != nil {
			child := providerNode(RoleMachinePoolInfrastructure, infra, clusterv1.ReadyCondition, opts)
			if opts.Echo || child.expanded || (child.Status != nil && child.Status.Status != string(metav1.ConditionTrue)) {
				n.Children = append(n.Children, child)
			}
		}
		n.Children = append(n.Children, machinesOf(func(m *clusterv1.Machine) bool {
			return controlledBy(m, "MachinePool", mp.Name) || (metav1.GetControllerOf(m) == nil && m.Labels[clusterv1.MachinePoolNameLabel] == mp.Name)
		})...)
		workers.Children = append(workers.Children, n)
	}
	if others := machinesOf(func(*clusterv1.Machine) bool { return true }); len(others) > 0 {
		workers.Children = append(workers.Children, &Node{Role: RoleOther, Children: others})
	}
	if len(workers.Children) > 0 {
		root.Children = append(root.Children, workers)
	}
	if opts.Grouping {
		group(root)
	}
	return root
}

// sorted returns o with its lists in name order, so that the tree does not
// depend on the order the API server listed them in; o is not changed.
func sorted(o Objects) Objects {
	o.MachineDeployments = slices.Clone(o.MachineDeployments)
	slices.SortFunc(o.MachineDeployments, func(a, b clusterv1.MachineDeployment) int { return strings.Compare(a.Name, b.Name) })
	o.MachineSets = slices.Clone(o.MachineSets)
	slices.SortFunc(o.MachineSets, func(a, b clusterv1.MachineSet) int { return strings.Compare(a.Name, b.Name) })
	o.MachinePools = slices.Clone(o.MachinePools)
	slices.SortFunc(o.MachinePools, func(a, b clusterv1.MachinePool) int { return strings.Compare(a.Name, b.Name) })
	o.Machines = slices.Clone(o.Machines)
	slices.SortFunc(o.Machines, func(a, b clusterv1.Machine) int { return strings.Compare(a.Name, b.Name) })
	return o
}

// topologyNode is the row of a managed Cluster's topology; its status is
// the TopologyReconciled condition, when the Cluster reports it.
func topologyNode(c *clusterv1.Cluster, conditions []Condition, opts Options) *Node {
	ref := c.Spec.Topology.ClassRef
	namespace := ref.Namespace
	if namespace == "" { // the class is in the Cluster's namespace
		namespace = c.Namespace
	}
	n := &Node{Role: RoleTopology, Kind: clusterv1.ClusterClassKind, Name: namespace + "/" + ref.Name, Version: c.Spec.Topology.Version}
	setConditions(n, conditions, clusterv1.ClusterTopologyReconciledCondition, opts)
	return n
}

func machineNode(m *clusterv1.Machine, o Objects, opts Options) *Node {
	n := &Node{Role: RoleMachine, Kind: "Machine", Name: m.Name, Phase: m.Status.Phase, Version: m.Spec.Version}
	setConditions(n, fromTyped(m.Status.Conditions), clusterv1.ReadyCondition, opts)
	n.alsoSame = conditionStatus(m.Status.Conditions, clusterv1.AvailableCondition) + "/" +
		conditionStatus(m.Status.Conditions, clusterv1.UpToDateCondition) + "/" + n.Phase + "/" + n.Version
	for _, p := range []struct {
		role string
		obj  *unstructured.Unstructured
	}{
		{RoleMachineInfrastructure, o.InfrastructureMachines[m.Name]},
		{RoleBootstrapConfig, o.BootstrapConfigs[m.Name]},
	} {
		if p.obj == nil {
			continue
		}
		child := providerNode(p.role, p.obj, clusterv1.ReadyCondition, opts)
		if opts.Echo || child.expanded || differs(child.Status, n.Status) {
			n.Children = append(n.Children, child)
		}
	}
	return n
}

// differs tells whether a provider object's state says something its
// Machine's does not; an object that reports no state says nothing.
func differs(child, parent *Condition) bool {
	if child == nil {
		return false
	}
	return parent == nil || child.Status != parent.Status || child.Reason != parent.Reason
}

func providerNode(role string, u *unstructured.Unstructured, summary string, opts Options) *Node {
	n := &Node{Role: role, Kind: u.GetKind(), Name: u.GetName()}
	setConditions(n, fromUnstructured(u), summary, opts)
	return n
}

func missingNode(role, kind, name, summary string) *Node {
	return &Node{Role: role, Kind: kind, Name: name, Status: &Condition{
		Type: summary, Status: string(metav1.ConditionUnknown), Reason: clusterv1.ObjectDoesNotExistReason,
		Message: fmt.Sprintf("%s %s does not exist", kind, name),
	}}
}

// setConditions picks the summary condition out of all and keeps the rest
// when the options ask for them.
func setConditions(n *Node, all []Condition, summary string, opts Options) {
	n.expanded = opts.showConditionsOf(n.Kind, n.Name)
	for i := range all {
		c := all[i]
		switch {
		case c.Type == summary:
			n.Status = &c
		case n.expanded:
			n.Conditions = append(n.Conditions, c)
		}
	}
}

func fromTyped(list []metav1.Condition) []Condition {
	out := make([]Condition, 0, len(list))
	for _, c := range list {
		out = append(out, Condition{Type: c.Type, Status: string(c.Status), Reason: c.Reason, Message: c.Message, LastTransitionTime: c.LastTransitionTime.UTC()})
	}
	return out
}

// fromUnstructured reads a provider object's status.conditions; entries
// that are not conditions are skipped.
func fromUnstructured(u *unstructured.Unstructured) []Condition {
	list, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	var out []Condition
	for _, item := range list {
		m, ok := item.(map[string]any)
		if !ok {
			continue
		}
		c := Condition{}
		c.Type, _ = m["type"].(string)
		c.Status, _ = m["status"].(string)
		c.Reason, _ = m["reason"].(string)
		c.Message, _ = m["message"].(string)
		if ts, ok := m["lastTransitionTime"].(string); ok {
			if t, err := time.Parse(time.RFC3339, ts); err == nil {
				c.LastTransitionTime = t.UTC()
			}
		}
		if c.Type != "" {
			out = append(out, c)
		}
	}
	return out
}

func controlledBy(obj metav1.Object, kind, name string) bool {
	ref := metav1.GetControllerOf(obj)
	return ref != nil && ref.Kind == kind && ref.Name == name
}

// clusterReplicas adds up the control plane's and the workers' counters.
func clusterReplicas(c *clusterv1.Cluster) *Replicas {
	var r Replicas
	if cp := c.Status.ControlPlane; cp != nil {
		r = Replicas{Desired: cp.DesiredReplicas, Current: cp.Replicas, Available: cp.AvailableReplicas, Ready: cp.ReadyReplicas, UpToDate: cp.UpToDateReplicas}
	}
	if w := c.Status.Workers; w != nil {
		r.Desired = sum(r.Desired, w.DesiredReplicas)
		r.Current = sum(r.Current, w.Replicas)
		r.Available = sum(r.Available, w.AvailableReplicas)
		r.Ready = sum(r.Ready, w.ReadyReplicas)
		r.UpToDate = sum(r.UpToDate, w.UpToDateReplicas)
	}
	if r == (Replicas{}) {
		return nil
	}
	return &r
}

func sum(a, b *int32) *int32 {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	s := *a + *b
	return &s
}

// group collapses, below every node, the Machines that are in the same state
// and show nothing of their own into one MachineGroup row, placed where the
// first of them was.
func group(n *Node) {
	for _, c := range n.Children {
		group(c)
	}
	type key struct{ status, reason, message, alsoSame string }
	members := map[key][]*Node{}
	for _, c := range n.Children {
		if groupable(c) {
			k := key{c.Status.Status, c.Status.Reason, c.Status.Message, c.alsoSame}
			members[k] = append(members[k], c)
		}
	}
	var out []*Node
	done := map[key]bool{}
	for _, c := range n.Children {
		if !groupable(c) {
			out = append(out, c)
			continue
		}
		k := key{c.Status.Status, c.Status.Reason, c.Status.Message, c.alsoSame}
		same := members[k]
		if len(same) < 2 {
			out = append(out, c)
			continue
		}
		if done[k] {
			continue
		}
		done[k] = true
		g := &Node{Role: RoleMachineGroup, Kind: "Machine", Phase: same[0].Phase, Version: same[0].Version}
		status := *same[0].Status
		for _, m := range same {
			g.Machines = append(g.Machines, m.Name)
			if m.Status.LastTransitionTime.After(status.LastTransitionTime) {
				status.LastTransitionTime = m.Status.LastTransitionTime
			}
		}
		sort.Strings(g.Machines)
		g.Status = &status
		out = append(out, g)
	}
	n.Children = out
}

// conditionStatus is the status of the condition of type t, or "" when the
// object does not report it.
func conditionStatus(conds []metav1.Condition, t string) string {
	if c := meta.FindStatusCondition(conds, t); c != nil {
		return string(c.Status)
	}
	return ""
}

func groupable(n *Node) bool {
	return n.Role == RoleMachine && n.Status != nil && !n.expanded && len(n.Children) == 0
}
