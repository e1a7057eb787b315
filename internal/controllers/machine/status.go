package machine

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/conditions"
	"capstan.dev/capstan/internal/workload"
)

// Reasons of the Machine's own conditions.
const (
	DataSecretProvidedReason   = "DataSecretProvided"
	NodeDoesNotExistReason     = "NodeDoesNotExist"
	NodeDeletedReason          = "NodeDeleted"
	NodeInspectionFailedReason = "NodeInspectionFailed"
	WaitingForNodeReason       = "WaitingForNode"
	NodeConditionsFailedReason = "NodeConditionsFailed"
	WaitingForMinReadyReason   = "WaitingForMinReadySeconds"
	ClusterDoesNotExistReason  = "ClusterDoesNotExist"
)

// pressureConditions are the Node conditions that make a Ready Node
// unhealthy when True.
var pressureConditions = []corev1.NodeConditionType{corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure}

func (r *Reconciler) summarize(s *scope) {
	if s.paused {
		return
	}
	m := s.machine
	set := func(c metav1.Condition) { conditions.Set(m, c) }
	set(bootstrapCondition(s))
	set(infrastructureCondition(s))
	nodeReady, nodeHealthy := nodeConditions(s)
	set(nodeReady)
	set(nodeHealthy)
	if !ownedByController(m) {
		// Owners decide whether their Machines are up to date; a Machine
		// nobody owns is, by definition.
		set(metav1.Condition{Type: clusterv1.UpToDateCondition, Status: metav1.ConditionTrue, Reason: clusterv1.UpToDateReason})
	}
	if m.DeletionTimestamp.IsZero() {
		set(metav1.Condition{Type: clusterv1.DeletingCondition, Status: metav1.ConditionFalse, Reason: clusterv1.NotDeletingReason})
	} else {
		reason := clusterv1.DeletingReason
		if s.waitingForPreTerminateHooks {
			reason = clusterv1.MachineDeletingWaitingForPreTerminateHookReason
		}
		set(metav1.Condition{Type: clusterv1.DeletingCondition, Status: metav1.ConditionTrue, Reason: reason, Message: s.deleting})
	}
	set(readyCondition(m))
	set(availableCondition(m, s.now))
	m.Status.Phase = string(machinePhase(s))
	m.Status.ObservedGeneration = m.Generation
}

func ownedByController(m *clusterv1.Machine) bool {
	for _, ref := range m.OwnerReferences {
		if ptr.Deref(ref.Controller, false) {
			return true
		}
	}
	return false
}

func bootstrapCondition(s *scope) metav1.Condition {
	m := s.machine
	if !m.Spec.Bootstrap.ConfigRef.IsDefined() {
		return metav1.Condition{Type: clusterv1.BootstrapConfigReadyCondition, Status: metav1.ConditionTrue, Reason: DataSecretProvidedReason}
	}
	return conditions.Mirror(clusterv1.BootstrapConfigReadyCondition, m.Spec.Bootstrap.ConfigRef, s.bootstrap, s.bootstrapErr,
		ptr.Deref(m.Status.Initialization.BootstrapDataSecretCreated, false), clusterv1.ReadyCondition, "its data secret created")
}

func infrastructureCondition(s *scope) metav1.Condition {
	m := s.machine
	return conditions.Mirror(clusterv1.InfrastructureReadyCondition, m.Spec.InfrastructureRef, s.infra, s.infraErr,
		ptr.Deref(m.Status.Initialization.InfrastructureProvisioned, false), clusterv1.ReadyCondition, "provisioned")
}

func nodeConditions(s *scope) (ready, healthy metav1.Condition) {
	m := s.machine
	ready = metav1.Condition{Type: clusterv1.NodeReadyCondition}
	healthy = metav1.Condition{Type: clusterv1.NodeHealthyCondition}
	switch {
	case s.node != nil:
		nodeReady := nodeCondition(s.node, corev1.NodeReady)
		if nodeReady == nil {
			ready.Status, ready.Reason, ready.Message = metav1.ConditionUnknown, clusterv1.ReadyUnknownReason, fmt.Sprintf("node %s reports no Ready condition", s.node.Name)
		} else {
			ready.Status = metav1.ConditionStatus(nodeReady.Status)
			ready.Reason = nodeReady.Reason
			if ready.Reason == "" {
				ready.Reason = string(nodeReady.Status)
			}
			ready.Message = nodeReady.Message
		}
		var problems []string
		for _, t := range pressureConditions {
			if c := nodeCondition(s.node, t); c != nil && c.Status == corev1.ConditionTrue {
				problems = append(problems, string(t))
			}
		}
		switch {
		case ready.Status != metav1.ConditionTrue:
			healthy.Status, healthy.Reason = ready.Status, NodeConditionsFailedReason
			healthy.Message = fmt.Sprintf("node %s is not Ready", s.node.Name)
		case len(problems) > 0:
			healthy.Status, healthy.Reason = metav1.ConditionFalse, NodeConditionsFailedReason
			healthy.Message = fmt.Sprintf("node %s reports %s", s.node.Name, strings.Join(problems, ", "))
		default:
			healthy.Status, healthy.Reason = metav1.ConditionTrue, clusterv1.ReadyReason
		}
		return ready, healthy
	case errors.Is(s.nodeErr, workload.ErrClusterNotConnected):
		// Whatever the Node said last is not what it says now: the
		// conditions do not know, and say why. The Machine is otherwise
		// left as it is; a lost connection alone remediates nothing.
		ready.Status, ready.Reason = metav1.ConditionUnknown, clusterv1.ConnectionDownReason
		ready.Message = "cannot reach the workload cluster: " + connectionMessage(s.nodeErr)
	case errors.Is(s.nodeErr, errNodeDeleted):
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, NodeDeletedReason, s.nodeErr.Error()
	case s.nodeErr != nil:
		ready.Status, ready.Reason, ready.Message = metav1.ConditionUnknown, NodeInspectionFailedReason, s.nodeErr.Error()
	case m.Spec.ProviderID == "":
		ready.Status, ready.Reason = metav1.ConditionUnknown, WaitingForNodeReason
		ready.Message = "waiting for the infrastructure to report a providerID"
	case s.cluster == nil || !ptr.Deref(s.cluster.Status.Initialization.ControlPlaneInitialized, false):
		ready.Status, ready.Reason = metav1.ConditionUnknown, WaitingForNodeReason
		ready.Message = "waiting for the cluster's control plane to be initialized"
	default:
		ready.Status, ready.Reason = metav1.ConditionUnknown, NodeDoesNotExistReason
		ready.Message = fmt.Sprintf("waiting for a Node with providerID %s", m.Spec.ProviderID)
	}
	healthy.Status, healthy.Reason, healthy.Message = ready.Status, ready.Reason, ready.Message
	return ready, healthy
}

// connectionMessage is what a NotConnectedError says is wrong, without the
// cluster's name the condition's object already gives.
func connectionMessage(err error) string {
	var nc *workload.NotConnectedError
	if errors.As(err, &nc) {
		return nc.Message
	}
	return err.Error()
}

func nodeCondition(n *corev1.Node, t corev1.NodeConditionType) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == t {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// readyCondition: bootstrap, infrastructure and Node are good, every
// readiness gate holds, and the Machine is not being deleted.
func readyCondition(m *clusterv1.Machine) metav1.Condition {
	var problems []string
	for _, t := range []string{clusterv1.BootstrapConfigReadyCondition, clusterv1.InfrastructureReadyCondition, clusterv1.NodeHealthyCondition} {
		if c := conditions.Get(m, t); c == nil || c.Status != metav1.ConditionTrue {
			problems = append(problems, describe(c, t))
		}
	}
	for _, gate := range m.Spec.ReadinessGates {
		want := metav1.ConditionTrue
		if gate.Polarity == clusterv1.NegativePolarityCondition {
			want = metav1.ConditionFalse
		}
		if c := conditions.Get(m, gate.ConditionType); c == nil || c.Status != want {
			problems = append(problems, fmt.Sprintf("readiness gate %s is not %s", gate.ConditionType, want))
		}
	}
	if !m.DeletionTimestamp.IsZero() {
		problems = append(problems, "the Machine is being deleted")
	}
	if len(problems) == 0 {
		return metav1.Condition{Type: clusterv1.ReadyCondition, Status: metav1.ConditionTrue, Reason: clusterv1.ReadyReason}
	}
	sort.Strings(problems)
	return metav1.Condition{Type: clusterv1.ReadyCondition, Status: metav1.ConditionFalse, Reason: clusterv1.NotReadyReason, Message: strings.Join(problems, "; ")}
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

// availableCondition: Ready for at least minReadySeconds.
func availableCondition(m *clusterv1.Machine, now time.Time) metav1.Condition {
	ready := conditions.Get(m, clusterv1.ReadyCondition)
	if ready == nil || ready.Status != metav1.ConditionTrue {
		return metav1.Condition{Type: clusterv1.AvailableCondition, Status: metav1.ConditionFalse, Reason: clusterv1.NotReadyReason, Message: "the Machine is not Ready"}
	}
	if wait := availableAfter(m, ready, now); wait > 0 {
		return metav1.Condition{Type: clusterv1.AvailableCondition, Status: metav1.ConditionFalse, Reason: WaitingForMinReadyReason,
			Message: fmt.Sprintf("Ready, waiting %s more for minReadySeconds", wait.Round(time.Second))}
	}
	return metav1.Condition{Type: clusterv1.AvailableCondition, Status: metav1.ConditionTrue, Reason: clusterv1.AvailableReason}
}

func availableAfter(m *clusterv1.Machine, ready *metav1.Condition, now time.Time) time.Duration {
	minReady := time.Duration(ptr.Deref(m.Spec.MinReadySeconds, 0)) * time.Second
	if minReady == 0 {
		// Available as soon as Ready, in the same write: the transition
		// time, stamped after the reconcile's clock was read, would
		// otherwise make it wait "0s more" and cost a second write.
		return 0
	}
	return ready.LastTransitionTime.Add(minReady).Sub(now)
}

// availableIn is how long until the Machine becomes Available, if it is
// Ready and waiting for minReadySeconds.
func (s *scope) availableIn() time.Duration {
	ready := conditions.Get(s.machine, clusterv1.ReadyCondition)
	if ready == nil || ready.Status != metav1.ConditionTrue {
		return 0
	}
	if d := availableAfter(s.machine, ready, s.now); d > 0 {
		return d + time.Second
	}
	return 0
}

func machinePhase(s *scope) clusterv1.MachinePhase {
	m := s.machine
	switch {
	case !m.DeletionTimestamp.IsZero():
		return clusterv1.MachinePhaseDeleting
	case m.Status.NodeRef.Name != "":
		return clusterv1.MachinePhaseRunning
	case ptr.Deref(m.Status.Initialization.InfrastructureProvisioned, false):
		return clusterv1.MachinePhaseProvisioned
	case ptr.Deref(m.Status.Initialization.BootstrapDataSecretCreated, false):
		return clusterv1.MachinePhaseProvisioning
	default:
		return clusterv1.MachinePhasePending
	}
}
