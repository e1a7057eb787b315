package machinepool

import (
	"fmt"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/conditions"
)

// DataSecretProvidedReason: the pool names its bootstrap data secret itself
// (spec.template.spec.bootstrap.dataSecretName without a configRef).
const DataSecretProvidedReason = "DataSecretProvided"

// updateStatus turns what the reconcile learned into the pool's status:
// replica counters, versions, conditions and the phase.
func (r *Reconciler) updateStatus(s *scope) {
	if s.paused {
		return
	}
	mp := s.mp
	// The counters change only from what this reconcile could read.
	counted := countReplicas(s)
	set := func(c metav1.Condition) { conditions.Set(mp, c) }
	set(bootstrapCondition(s))
	set(conditions.Mirror(clusterv1.InfrastructureReadyCondition, mp.Spec.Template.Spec.InfrastructureRef, s.infra, s.infraErr,
		ptr.Deref(mp.Status.Initialization.InfrastructureProvisioned, false), clusterv1.ReadyCondition, "its infrastructure provisioned"))
	if counted {
		set(machinesCondition(s, clusterv1.ReadyCondition, clusterv1.MachinesReadyCondition, clusterv1.ReadyReason, clusterv1.NotReadyReason, clusterv1.ReadyUnknownReason, "ready", mp.Status.ReadyReplicas))
		set(machinesCondition(s, clusterv1.UpToDateCondition, clusterv1.MachinesUpToDateCondition, clusterv1.UpToDateReason, clusterv1.NotUpToDateReason, clusterv1.UpToDateUnknownReason, "up to date", mp.Status.UpToDateReplicas))
	} else if s.cluster == nil && mp.DeletionTimestamp.IsZero() {
		msg := "Cluster " + mp.Spec.ClusterName + " does not exist"
		for _, t := range []string{clusterv1.MachinesReadyCondition, clusterv1.MachinesUpToDateCondition} {
			set(metav1.Condition{Type: t, Status: metav1.ConditionUnknown, Reason: clusterv1.ObjectDoesNotExistReason, Message: msg})
		}
	}
	set(scalingUp(s))
	set(scalingDown(s))
	set(remediating(s))
	set(available(s))
	if mp.DeletionTimestamp.IsZero() {
		set(metav1.Condition{Type: clusterv1.DeletingCondition, Status: metav1.ConditionFalse, Reason: clusterv1.NotDeletingReason})
	} else {
		set(metav1.Condition{Type: clusterv1.DeletingCondition, Status: metav1.ConditionTrue, Reason: clusterv1.DeletingReason, Message: s.deleting})
	}
	mp.Status.Phase = string(phase(mp))
	mp.Status.ObservedGeneration = mp.Generation
}

// countReplicas fills in the ready, available and up-to-date counters and
// the versions: from the pool's Machines when its provider makes them,
// otherwise from its Nodes. It tells whether it could.
func countReplicas(s *scope) bool {
	mp := s.mp
	var ready, available, upToDate int32
	versions := map[string]int32{}
	switch {
	case s.machinesRead && s.infraPool.InfrastructureMachineKind != "":
		ready, available, upToDate = conditions.CountMachines(s.machines)
		for _, m := range s.machines {
			if m.Spec.Version != "" {
				versions[m.Spec.Version]++
			}
		}
	case s.nodes != nil || (s.infraRead && len(mp.Spec.ProviderIDList) == 0):
		// Without Machines a ready Node is all there is to be available, and
		// a Node runs the pool's version or not.
		for _, n := range s.nodes {
			v := n.Status.NodeInfo.KubeletVersion
			if nodeReady(n) {
				ready++
			}
			if want := mp.Spec.Template.Spec.Version; want == "" || v == want {
				upToDate++
			}
			if v != "" {
				versions[v]++
			}
		}
		available = ready
	default:
		return false
	}
	mp.Status.ReadyReplicas = ptr.To(ready)
	mp.Status.AvailableReplicas = ptr.To(available)
	mp.Status.UpToDateReplicas = ptr.To(upToDate)
	mp.Status.Versions = nil
	for v, n := range versions {
		mp.Status.Versions = append(mp.Status.Versions, clusterv1.StatusVersion{Version: v, Replicas: n})
	}
	sort.Slice(mp.Status.Versions, func(i, j int) bool { return mp.Status.Versions[i].Version < mp.Status.Versions[j].Version })
	return true
}

func bootstrapCondition(s *scope) metav1.Condition {
	mp := s.mp
	if !mp.Spec.Template.Spec.Bootstrap.ConfigRef.IsDefined() {
		return metav1.Condition{Type: clusterv1.BootstrapConfigReadyCondition, Status: metav1.ConditionTrue, Reason: DataSecretProvidedReason}
	}
	return conditions.Mirror(clusterv1.BootstrapConfigReadyCondition, mp.Spec.Template.Spec.Bootstrap.ConfigRef, s.bootstrap, s.bootstrapErr,
		ptr.Deref(mp.Status.Initialization.BootstrapDataSecretCreated, false), clusterv1.ReadyCondition, "its data secret created")
}

// machinesCondition summarises the Machines' condition machineType (with
// Machines), or compares the counter with the instances (without).
func machinesCondition(s *scope, machineType, poolType, trueReason, falseReason, unknownReason, adjective string, count *int32) metav1.Condition {
	if s.infraPool.InfrastructureMachineKind != "" {
		return conditions.AggregateMachines(s.machines, machineType, poolType, trueReason, falseReason, unknownReason, adjective)
	}
	total := int32(len(s.mp.Spec.ProviderIDList))
	c := metav1.Condition{Type: poolType}
	switch n := ptr.Deref(count, 0); {
	case total == 0:
		c.Status, c.Reason = metav1.ConditionTrue, clusterv1.NoReplicasReason
	case n >= total:
		c.Status, c.Reason = metav1.ConditionTrue, trueReason
	default:
		c.Status, c.Reason = metav1.ConditionFalse, falseReason
		c.Message = fmt.Sprintf("%d of %d Nodes are not %s", total-n, total, adjective)
	}
	return c
}

// desired is the number of instances the pool should have now.
func desired(mp *clusterv1.MachinePool) int32 {
	if !mp.DeletionTimestamp.IsZero() {
		return 0
	}
	return ptr.Deref(mp.Spec.Replicas, 0)
}

func scalingUp(s *scope) metav1.Condition {
	want, have := desired(s.mp), ptr.Deref(s.mp.Status.Replicas, 0)
	if have >= want {
		return metav1.Condition{Type: clusterv1.ScalingUpCondition, Status: metav1.ConditionFalse, Reason: clusterv1.NotScalingUpReason}
	}
	msg := fmt.Sprintf("Scaling up from %d to %d replicas", have, want)
	var blocked []string
	if !ptr.Deref(s.mp.Status.Initialization.BootstrapDataSecretCreated, false) {
		blocked = append(blocked, "waiting for the bootstrap data secret")
	}
	if !ptr.Deref(s.mp.Status.Initialization.InfrastructureProvisioned, false) {
		blocked = append(blocked, "waiting for the infrastructure to be provisioned")
	}
	if len(blocked) > 0 {
		msg += " is blocked: " + strings.Join(blocked, "; ")
	}
	return metav1.Condition{Type: clusterv1.ScalingUpCondition, Status: metav1.ConditionTrue, Reason: clusterv1.ScalingUpReason, Message: msg}
}

func scalingDown(s *scope) metav1.Condition {
	want, have := desired(s.mp), ptr.Deref(s.mp.Status.Replicas, 0)
	if have > want {
		return metav1.Condition{Type: clusterv1.ScalingDownCondition, Status: metav1.ConditionTrue, Reason: clusterv1.ScalingDownReason,
			Message: fmt.Sprintf("Scaling down from %d to %d replicas", have, want)}
	}
	return metav1.Condition{Type: clusterv1.ScalingDownCondition, Status: metav1.ConditionFalse, Reason: clusterv1.NotScalingDownReason}
}

// remediating: the pool remediates a Machine a MachineHealthCheck marked by
// deleting it; the provider replaces the instance.
func remediating(s *scope) metav1.Condition {
	var asked []string
	for _, m := range s.machines {
		if isFalse(m, clusterv1.OwnerRemediatedCondition) {
			asked = append(asked, m.Name)
		}
	}
	if len(asked) > 0 {
		return metav1.Condition{Type: clusterv1.RemediatingCondition, Status: metav1.ConditionTrue, Reason: clusterv1.RemediatingReason,
			Message: "Remediating " + conditions.MachineList(asked)}
	}
	return metav1.Condition{Type: clusterv1.RemediatingCondition, Status: metav1.ConditionFalse, Reason: clusterv1.NotRemediatingReason}
}

// available: the infrastructure is provisioned and at least as many
// replicas are available as wanted.
func available(s *scope) metav1.Condition {
	mp := s.mp
	c := metav1.Condition{Type: clusterv1.AvailableCondition}
	want, have := desired(mp), ptr.Deref(mp.Status.AvailableReplicas, 0)
	switch {
	case !mp.DeletionTimestamp.IsZero():
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, clusterv1.DeletingReason, "the MachinePool is being deleted"
	case s.cluster == nil:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, clusterv1.ObjectDoesNotExistReason, "Cluster "+mp.Spec.ClusterName+" does not exist"
	case !ptr.Deref(mp.Status.Initialization.InfrastructureProvisioned, false):
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, clusterv1.NotAvailableReason, "the infrastructure is not provisioned yet"
	case have < want:
		c.Status, c.Reason = metav1.ConditionFalse, clusterv1.NotAvailableReason
		c.Message = fmt.Sprintf("%d available replicas, at least %d required", have, want)
	default:
		c.Status, c.Reason = metav1.ConditionTrue, clusterv1.AvailableReason
	}
	return c
}

// phase is the one-word summary, decided as upstream decides it.
func phase(mp *clusterv1.MachinePool) clusterv1.MachinePoolPhase {
	p := clusterv1.MachinePoolPhase(mp.Status.Phase)
	if p == "" {
		p = clusterv1.MachinePoolPhasePending
	}
	provisioned := ptr.Deref(mp.Status.Initialization.InfrastructureProvisioned, false)
	if ptr.Deref(mp.Status.Initialization.BootstrapDataSecretCreated, false) && !provisioned {
		p = clusterv1.MachinePoolPhaseProvisioning
	}
	if len(mp.Status.NodeRefs) != 0 {
		p = clusterv1.MachinePoolPhaseProvisioned
	}
	ready := ptr.Deref(mp.Status.ReadyReplicas, 0)
	external := mp.Annotations[clusterv1.ReplicasManagedByAnnotation]
	_, managed := mp.Annotations[clusterv1.ReplicasManagedByAnnotation]
	managed = managed && external != "false"
	if provisioned && mp.Spec.Replicas != nil {
		switch want := *mp.Spec.Replicas; {
		case want == ready:
			p = clusterv1.MachinePoolPhaseRunning
		case managed:
			p = clusterv1.MachinePoolPhaseScaling
		case want > ready:
			p = clusterv1.MachinePoolPhaseScalingUp
		default:
			p = clusterv1.MachinePoolPhaseScalingDown
		}
	}
	if !mp.DeletionTimestamp.IsZero() {
		p = clusterv1.MachinePoolPhaseDeleting
	}
	return p
}
