package chaos

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	controlplanev1 "capstan.dev/capstan/api/controlplane/kubeadm/v1beta2"
	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/conditions"
)

// Snapshot is what one look at the run's namespace listed: the kinds whose
// spec and status the checks read in full, the others by their metadata.
type Snapshot struct {
	Clusters      []clusterv1.Cluster
	ControlPlanes []controlplanev1.KubeadmControlPlane
	Deployments   []clusterv1.MachineDeployment
	Sets          []clusterv1.MachineSet
	Machines      []clusterv1.Machine
	// Others are InMemoryClusters, InMemoryMachines, KubeadmConfigs and
	// Secrets, each with its TypeMeta's Kind set.
	Others []metav1.PartialObjectMetadata
}

// ClusterWant is what one remaining cluster must have come to.
type ClusterWant struct {
	ControlPlane int32
	Workers      int32
	Version      string
}

// Want is the desired state the driver asked for: the clusters that remain,
// and the names of those it deleted.
type Want struct {
	Clusters map[string]ClusterWant
	Deleted  map[string]bool
}

// FindingKind sorts what a check found.
type FindingKind string

const (
	// Duplicate: more Machines than an owner wants, two infrastructure or
	// bootstrap objects for one Machine, or a Machine nothing asked for.
	Duplicate FindingKind = "duplicate"
	// Orphan: an object whose owner is gone, or anything left of a deleted
	// Cluster.
	Orphan FindingKind = "orphan"
	// StuckFinalizer: an object being deleted that is still there.
	StuckFinalizer FindingKind = "stuck-finalizer"
	// NotConverged: a remaining cluster not (yet) Available at its desired
	// version and counts.
	NotConverged FindingKind = "not-converged"
)

// Finding is one thing a check found, naming the objects ("Kind/name").
type Finding struct {
	Kind    FindingKind `json:"kind"`
	Objects []string    `json:"objects"`
	Message string      `json:"message"`
}

func (f Finding) String() string {
	return fmt.Sprintf("%s: %s: %s", f.Kind, strings.Join(f.Objects, ", "), f.Message)
}

// CountByKind counts findings by their kind.
func CountByKind(fs []Finding) map[FindingKind]int {
	out := map[FindingKind]int{}
	for _, f := range fs {
		out[f.Kind]++
	}
	return out
}

// meta is any listed object with its kind.
type meta struct {
	kind string
	obj  metav1.Object
}

func (m meta) ref() string { return m.kind + "/" + m.obj.GetName() }

func (s *Snapshot) all() []meta {
	var out []meta
	for i := range s.Clusters {
		out = append(out, meta{"Cluster", &s.Clusters[i]})
	}
	for i := range s.ControlPlanes {
		out = append(out, meta{"KubeadmControlPlane", &s.ControlPlanes[i]})
	}
	for i := range s.Deployments {
		out = append(out, meta{"MachineDeployment", &s.Deployments[i]})
	}
	for i := range s.Sets {
		out = append(out, meta{"MachineSet", &s.Sets[i]})
	}
	for i := range s.Machines {
		out = append(out, meta{"Machine", &s.Machines[i]})
	}
	for i := range s.Others {
		out = append(out, meta{s.Others[i].Kind, &s.Others[i]})
	}
	return out
}

// Check is every invariant over one snapshot: nothing duplicated, nothing
// orphaned, nothing stuck deleting, and every remaining cluster converged.
// No finding means the run is at rest where it should be.
func Check(s Snapshot, w Want) []Finding {
	objs := s.all()
	var out []Finding
	out = append(out, stuck(objs)...)
	out = append(out, orphans(objs, w)...)
	out = append(out, duplicates(s, objs)...)
	out = append(out, unconverged(s, w)...)
	return out
}

// stuck finds objects being deleted: at rest nothing may be.
func stuck(objs []meta) []Finding {
	var out []Finding
	for _, m := range objs {
		if ts := m.obj.GetDeletionTimestamp(); ts != nil {
			out = append(out, Finding{Kind: StuckFinalizer, Objects: []string{m.ref()},
				Message: fmt.Sprintf("being deleted since %s, finalizers %v", ts.UTC().Format("15:04:05"), m.obj.GetFinalizers())})
		}
	}
	return out
}

// machineChildren are the kinds a Machine owns one of each.
var machineChildren = map[string]bool{"InMemoryMachine": true, "KubeadmConfig": true}

// orphans finds objects whose owner is not among the listed objects (when
// the owner is of a listed kind), infrastructure and bootstrap objects no
// Machine owns, and anything of a deleted Cluster.
func orphans(objs []meta, w Want) []Finding {
	uids := map[types.UID]bool{}
	kinds := map[string]bool{}
	for _, m := range objs {
		uids[m.obj.GetUID()] = true
		kinds[m.kind] = true
	}
	var out []Finding
	for _, m := range objs {
		var why []string
		ownedByMachine := false
		for _, ref := range m.obj.GetOwnerReferences() {
			if ref.Kind == "Machine" {
				ownedByMachine = true
			}
			if kinds[ref.Kind] && !uids[ref.UID] {
				why = append(why, fmt.Sprintf("its owner %s/%s is gone", ref.Kind, ref.Name))
			}
		}
		if machineChildren[m.kind] && !ownedByMachine {
			why = append(why, "no Machine owns it")
		}
		cluster := m.obj.GetLabels()[clusterv1.ClusterNameLabel]
		if m.kind == "Cluster" {
			cluster = m.obj.GetName()
		}
		if w.Deleted[cluster] && m.obj.GetDeletionTimestamp() == nil {
			why = append(why, fmt.Sprintf("left of deleted Cluster %s", cluster))
		}
		if len(why) > 0 {
			out = append(out, Finding{Kind: Orphan, Objects: []string{m.ref()}, Message: strings.Join(why, "; ")})
		}
	}
	return out
}

// controller is the UID of an object's controlling owner.
func controller(o metav1.Object) (types.UID, bool) {
	for _, ref := range o.GetOwnerReferences() {
		if ref.Controller != nil && *ref.Controller {
			return ref.UID, true
		}
	}
	return "", false
}

// duplicates finds Machines beyond what their owner wants, Machines no
// owner asked for, and more than one infrastructure or bootstrap object
// per Machine.
func duplicates(s Snapshot, objs []meta) []Finding {
	var out []Finding
	byOwner := map[types.UID][]string{}
	for i := range s.Machines {
		m := &s.Machines[i]
		if m.DeletionTimestamp != nil {
			continue
		}
		owner, ok := controller(m)
		if !ok {
			out = append(out, Finding{Kind: Duplicate, Objects: []string{"Machine/" + m.Name}, Message: "no MachineSet or control plane owns it: nothing asked for it"})
			continue
		}
		byOwner[owner] = append(byOwner[owner], "Machine/"+m.Name)
	}
	tooMany := func(ownerRef string, want int32, machines []string) {
		if int32(len(machines)) > want {
			sort.Strings(machines)
			out = append(out, Finding{Kind: Duplicate, Objects: append([]string{ownerRef}, machines...),
				Message: fmt.Sprintf("%d Machines, %d wanted", len(machines), want)})
		}
	}
	for i := range s.Sets {
		ms := &s.Sets[i]
		tooMany("MachineSet/"+ms.Name, deref(ms.Spec.Replicas), byOwner[ms.UID])
	}
	for i := range s.ControlPlanes {
		kcp := &s.ControlPlanes[i]
		tooMany("KubeadmControlPlane/"+kcp.Name, deref(kcp.Spec.Replicas), byOwner[kcp.UID])
	}
	for i := range s.Deployments {
		md := &s.Deployments[i]
		var machines []string
		for j := range s.Sets {
			if owner, ok := controller(&s.Sets[j]); ok && owner == md.UID {
				machines = append(machines, byOwner[s.Sets[j].UID]...)
			}
		}
		tooMany("MachineDeployment/"+md.Name, deref(md.Spec.Replicas), machines)
	}
	perMachine := map[string][]string{}
	for _, m := range objs {
		if !machineChildren[m.kind] || m.obj.GetDeletionTimestamp() != nil {
			continue
		}
		for _, ref := range m.obj.GetOwnerReferences() {
			if ref.Kind == "Machine" {
				key := m.kind + " of Machine/" + ref.Name
				perMachine[key] = append(perMachine[key], m.ref())
			}
		}
	}
	for _, key := range slices.Sorted(maps.Keys(perMachine)) {
		if refs := perMachine[key]; len(refs) > 1 {
			sort.Strings(refs)
			out = append(out, Finding{Kind: Duplicate, Objects: refs, Message: fmt.Sprintf("%d of them: one %s", len(refs), key)})
		}
	}
	return out
}

// unconverged finds remaining clusters not Available at their desired
// version and counts, and deleted Clusters not even being deleted.
func unconverged(s Snapshot, w Want) []Finding {
	var out []Finding
	not := func(ref, format string, args ...any) {
		out = append(out, Finding{Kind: NotConverged, Objects: []string{ref}, Message: fmt.Sprintf(format, args...)})
	}
	clusters := map[string]*clusterv1.Cluster{}
	for i := range s.Clusters {
		clusters[s.Clusters[i].Name] = &s.Clusters[i]
	}
	kcps := map[string]*controlplanev1.KubeadmControlPlane{}
	for i := range s.ControlPlanes {
		kcps[s.ControlPlanes[i].Name] = &s.ControlPlanes[i]
	}
	for _, name := range slices.Sorted(maps.Keys(w.Clusters)) {
		want := w.Clusters[name]
		c := clusters[name]
		if c == nil {
			not("Cluster/"+name, "missing")
			continue
		}
		if !conditions.IsTrue(c, clusterv1.AvailableCondition) {
			msg := "no Available condition"
			if cond := conditions.Get(c, clusterv1.AvailableCondition); cond != nil {
				msg = fmt.Sprintf("Available %s: %s", cond.Status, cond.Message)
			}
			not("Cluster/"+name, "%s", msg)
		}
		if kcp := kcps[c.Spec.ControlPlaneRef.Name]; kcp == nil {
			not("Cluster/"+name, "its KubeadmControlPlane %s is missing", c.Spec.ControlPlaneRef.Name)
		} else if why := controlPlaneShort(kcp, want); why != "" {
			not("KubeadmControlPlane/"+kcp.Name, "%s", why)
		}
		var workers int32
		for i := range s.Deployments {
			md := &s.Deployments[i]
			if md.Spec.ClusterName != name {
				continue
			}
			workers += deref(md.Spec.Replicas)
			if why := deploymentShort(md, want.Version); why != "" {
				not("MachineDeployment/"+md.Name, "%s", why)
			}
		}
		if workers != want.Workers {
			not("Cluster/"+name, "its MachineDeployments want %d workers, the run %d", workers, want.Workers)
		}
		machines := 0
		for i := range s.Machines {
			m := &s.Machines[i]
			if m.Spec.ClusterName != name {
				continue
			}
			machines++
			switch {
			case m.Spec.Version != want.Version:
				not("Machine/"+m.Name, "at %s, want %s", m.Spec.Version, want.Version)
			case m.Status.Phase != string(clusterv1.MachinePhaseRunning):
				not("Machine/"+m.Name, "phase %q, want Running", m.Status.Phase)
			}
		}
		if total := int(want.ControlPlane + want.Workers); machines != total {
			not("Cluster/"+name, "%d Machines, want %d", machines, total)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(w.Deleted)) {
		if c := clusters[name]; c != nil && c.DeletionTimestamp == nil {
			not("Cluster/"+name, "deleted by the run but not being deleted")
		}
	}
	return out
}

// controlPlaneShort says how a control plane falls short of want, or "".
func controlPlaneShort(kcp *controlplanev1.KubeadmControlPlane, want ClusterWant) string {
	st := kcp.Status
	switch {
	case deref(kcp.Spec.Replicas) != want.ControlPlane || kcp.Spec.Version != want.Version:
		return fmt.Sprintf("spec wants %d at %s, the run %d at %s", deref(kcp.Spec.Replicas), kcp.Spec.Version, want.ControlPlane, want.Version)
	case st.ObservedGeneration != kcp.Generation:
		return fmt.Sprintf("status of generation %d, spec %d", st.ObservedGeneration, kcp.Generation)
	case deref(st.Replicas) != want.ControlPlane || deref(st.ReadyReplicas) != want.ControlPlane || deref(st.UpToDateReplicas) != want.ControlPlane:
		return fmt.Sprintf("%d replicas, %d ready, %d up to date; want %d", deref(st.Replicas), deref(st.ReadyReplicas), deref(st.UpToDateReplicas), want.ControlPlane)
	case st.Version != want.Version:
		return fmt.Sprintf("reports version %q, want %s", st.Version, want.Version)
	}
	return ""
}

// deploymentShort says how a MachineDeployment falls short of its own
// replicas at version, or "".
func deploymentShort(md *clusterv1.MachineDeployment, version string) string {
	st, n := md.Status, deref(md.Spec.Replicas)
	switch {
	case md.Spec.Template.Spec.Version != version:
		return fmt.Sprintf("template at %s, want %s", md.Spec.Template.Spec.Version, version)
	case st.ObservedGeneration != md.Generation:
		return fmt.Sprintf("status of generation %d, spec %d", st.ObservedGeneration, md.Generation)
	case deref(st.Replicas) != n || deref(st.ReadyReplicas) != n || deref(st.UpToDateReplicas) != n:
		return fmt.Sprintf("%d replicas, %d ready, %d up to date; want %d", deref(st.Replicas), deref(st.ReadyReplicas), deref(st.UpToDateReplicas), n)
	}
	return ""
}

func deref(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}
