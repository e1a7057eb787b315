package cluster

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/conditions"
)

// Reasons of the Cluster's own conditions.
const (
	InitializedReason     = "Initialized"
	NotInitializedReason  = "NotInitialized"
	ProbeNotStartedReason = "ProbeNotStarted"
	ProbeSucceededReason  = "ProbeSucceeded"
	ProbeFailedReason     = "ProbeFailed"
	NoWorkersReason       = "NoWorkers"
)

// summarize turns what the reconcile learned into conditions and a phase.
func (r *Reconciler) summarize(s *scope) {
	if s.paused {
		return
	}
	c := s.cluster
	set := func(cond metav1.Condition) { conditions.Set(c, cond) }

	set(conditions.Mirror(clusterv1.InfrastructureReadyCondition, c.Spec.InfrastructureRef, s.infra, s.infraErr,
		ptr.Deref(c.Status.Initialization.InfrastructureProvisioned, false), "Ready", "provisioned"))
	set(initializedCondition(c))
	set(controlPlaneAvailable(c, s))
	set(workersAvailable(s))
	if s.remoteConnection != nil {
		set(*s.remoteConnection)
	} else if conditions.Get(c, clusterv1.ClusterRemoteConnectionProbeCondition) == nil {
		set(metav1.Condition{Type: clusterv1.ClusterRemoteConnectionProbeCondition, Status: metav1.ConditionUnknown, Reason: ProbeNotStartedReason})
	}
	if c.DeletionTimestamp.IsZero() {
		set(metav1.Condition{Type: clusterv1.DeletingCondition, Status: metav1.ConditionFalse, Reason: clusterv1.NotDeletingReason})
	} else {
		set(metav1.Condition{Type: clusterv1.DeletingCondition, Status: metav1.ConditionTrue, Reason: clusterv1.DeletingReason, Message: s.deleting})
	}
	set(available(c))
	c.Status.Phase = string(clusterPhase(c))
	c.Status.ObservedGeneration = c.Generation
}

func initializedCondition(c *clusterv1.Cluster) metav1.Condition {
	if ptr.Deref(c.Status.Initialization.ControlPlaneInitialized, false) {
		return metav1.Condition{Type: clusterv1.ClusterControlPlaneInitializedCondition, Status: metav1.ConditionTrue, Reason: InitializedReason}
	}
	msg := "waiting for the control plane to report initialized"
	if !c.Spec.ControlPlaneRef.IsDefined() {
		msg = "waiting for a control plane Machine to have a Node"
	}
	return metav1.Condition{Type: clusterv1.ClusterControlPlaneInitializedCondition, Status: metav1.ConditionFalse, Reason: NotInitializedReason, Message: msg}
}

func controlPlaneAvailable(c *clusterv1.Cluster, s *scope) metav1.Condition {
	if c.Spec.ControlPlaneRef.IsDefined() {
		return conditions.Mirror(clusterv1.ClusterControlPlaneAvailableCondition, c.Spec.ControlPlaneRef, s.controlPlane, s.controlPlaneErr,
			ptr.Deref(c.Status.Initialization.ControlPlaneInitialized, false), clusterv1.AvailableCondition, "initialized")
	}
	cond := metav1.Condition{Type: clusterv1.ClusterControlPlaneAvailableCondition}
	if cp := c.Status.ControlPlane; cp != nil && ptr.Deref(cp.AvailableReplicas, 0) > 0 {
		cond.Status, cond.Reason = metav1.ConditionTrue, clusterv1.AvailableReason
	} else {
		cond.Status, cond.Reason = metav1.ConditionFalse, clusterv1.NotAvailableReason
		cond.Message = "no control plane Machine is Available"
	}
	return cond
}

// workersAvailable is True when every MachineDeployment and MachinePool is
// Available.
func workersAvailable(s *scope) metav1.Condition {
	cond := metav1.Condition{Type: clusterv1.ClusterWorkersAvailableCondition}
	if !s.machinesRead {
		cond.Status, cond.Reason = metav1.ConditionUnknown, clusterv1.AvailableUnknownReason
		return cond
	}
	if len(s.machineDeployments) == 0 && len(s.machinePools) == 0 {
		cond.Status, cond.Reason = metav1.ConditionTrue, NoWorkersReason
		return cond
	}
	var notAvailable, poolsNotAvailable []string
	for i := range s.machineDeployments {
		md := &s.machineDeployments[i]
		if !conditions.IsTrue(md, clusterv1.AvailableCondition) {
			notAvailable = append(notAvailable, md.Name)
		}
	}
	for i := range s.machinePools {
		mp := &s.machinePools[i]
		if !conditions.IsTrue(mp, clusterv1.AvailableCondition) {
			poolsNotAvailable = append(poolsNotAvailable, mp.Name)
		}
	}
	if len(notAvailable)+len(poolsNotAvailable) == 0 {
		cond.Status, cond.Reason = metav1.ConditionTrue, clusterv1.AvailableReason
		return cond
	}
	sort.Strings(notAvailable)
	sort.Strings(poolsNotAvailable)
	cond.Status, cond.Reason = metav1.ConditionFalse, clusterv1.NotAvailableReason
	var msgs []string
	if len(notAvailable) > 0 {
		msgs = append(msgs, "MachineDeployments not Available: "+strings.Join(notAvailable, ", "))
	}
	if len(poolsNotAvailable) > 0 {
		msgs = append(msgs, "MachinePools not Available: "+strings.Join(poolsNotAvailable, ", "))
	}
	cond.Message = strings.Join(msgs, "; ")
	return cond
}

// workloadRetry is how soon a Cluster whose workload cluster cannot be
// reached looks again; the cache itself retries no sooner than every 10 s.
const workloadRetry = 15 * time.Second

// reconcileRemoteConnection reports whether the workload cluster answers:
// once its infrastructure is provisioned by a one-off probe, and once its
// control plane is initialized through the cache every controller shares.
func (r *Reconciler) reconcileRemoteConnection(ctx context.Context, s *scope) (time.Duration, error) {
	cond := r.remoteConnection(ctx, s.cluster)
	s.remoteConnection = &cond
	if cond.Status == metav1.ConditionFalse {
		return workloadRetry, nil
	}
	return 0, nil
}

func (r *Reconciler) remoteConnection(ctx context.Context, c *clusterv1.Cluster) metav1.Condition {
	cond := metav1.Condition{Type: clusterv1.ClusterRemoteConnectionProbeCondition}
	failed := func(err error) metav1.Condition {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, ProbeFailedReason, err.Error()
		return cond
	}
	key := client.ObjectKeyFromObject(c)
	switch {
	case !ptr.Deref(c.Status.Initialization.InfrastructureProvisioned, false):
		cond.Status, cond.Reason = metav1.ConditionUnknown, ProbeNotStartedReason
		cond.Message = "the workload cluster is probed once its infrastructure is provisioned"
	case r.Workload == nil:
		cond.Status, cond.Reason = metav1.ConditionUnknown, ProbeNotStartedReason
		cond.Message = "this manager has no workload cluster access"
	case !ptr.Deref(c.Status.Initialization.ControlPlaneInitialized, false):
		// Connecting through the cache now would make a failure hold back
		// the controllers' first connection by the cache's retry interval,
		// just when the control plane comes up; a probe keeps nothing.
		if err := r.Workload.Probe(ctx, key); err != nil {
			return failed(err)
		}
		cond.Status, cond.Reason = metav1.ConditionTrue, ProbeSucceededReason
	default:
		// Connecting is lazy; asking for a client makes the cache connect
		// and start probing.
		if _, err := r.Workload.GetClient(ctx, key); err != nil {
			return failed(err)
		}
		if h := r.Workload.Health(key); !h.Connected {
			return failed(errors.New(h.Message))
		}
		cond.Status, cond.Reason = metav1.ConditionTrue, ProbeSucceededReason
	}
	return cond
}

// available is the Cluster's summary: True when every part is good and
// every availability gate holds.
func available(c *clusterv1.Cluster) metav1.Condition {
	var problems []string
	for _, t := range []string{
		clusterv1.InfrastructureReadyCondition,
		clusterv1.ClusterControlPlaneAvailableCondition,
		clusterv1.ClusterWorkersAvailableCondition,
		clusterv1.ClusterRemoteConnectionProbeCondition,
	} {
		if !conditions.IsTrue(c, t) {
			problems = append(problems, describe(conditions.Get(c, t), t))
		}
	}
	for _, gate := range c.Spec.AvailabilityGates {
		got := conditions.Get(c, gate.ConditionType)
		want := metav1.ConditionTrue
		if gate.Polarity == clusterv1.NegativePolarityCondition {
			want = metav1.ConditionFalse
		}
		if got == nil || got.Status != want {
			problems = append(problems, fmt.Sprintf("availability gate %s is not %s", gate.ConditionType, want))
		}
	}
	if !c.DeletionTimestamp.IsZero() {
		problems = append(problems, "the Cluster is being deleted")
	}
	if len(problems) == 0 {
		return metav1.Condition{Type: clusterv1.AvailableCondition, Status: metav1.ConditionTrue, Reason: clusterv1.AvailableReason}
	}
	return metav1.Condition{Type: clusterv1.AvailableCondition, Status: metav1.ConditionFalse, Reason: clusterv1.NotAvailableReason,
		Message: strings.Join(problems, "; ")}
}

func describe(c *metav1.Condition, t string) string {
	if c == nil {
		return t + " is not reported"
	}
	if c.Message != "" {
		return t + ": " + c.Message
	}
	return fmt.Sprintf("%s is %s (%s)", t, c.Status, c.Reason)
}

func clusterPhase(c *clusterv1.Cluster) clusterv1.ClusterPhase {
	switch {
	case !c.DeletionTimestamp.IsZero():
		return clusterv1.ClusterPhaseDeleting
	case ptr.Deref(c.Status.Initialization.InfrastructureProvisioned, false) &&
		(c.Spec.ControlPlaneEndpoint.IsValid() || !c.Spec.InfrastructureRef.IsDefined()):
		return clusterv1.ClusterPhaseProvisioned
	case c.Spec.InfrastructureRef.IsDefined():
		return clusterv1.ClusterPhaseProvisioning
	default:
		return clusterv1.ClusterPhasePending
	}
}
