package kubeadmcontrolplane

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/utils/ptr"

	controlplanev1 "capstan.dev/capstan/api/controlplane/kubeadm/v1beta2"
	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/conditions"
	"capstan.dev/capstan/internal/plan"
	"capstan.dev/capstan/internal/workload"
)

// Reasons of the control plane's own conditions.
const (
	initializedReason     = "Initialized"
	notInitializedReason  = "NotInitialized"
	healthyReason         = "Healthy"
	notHealthyReason      = "NotHealthy"
	healthUnknownReason   = "HealthUnknown"
	certificatesAvailable = "CertificatesAvailable"
	certificatesError     = "CertificatesError"
)

// updateStatus computes the whole status from the scope; the deferred patch
// writes it only when something changed.
func (r *Reconciler) updateStatus(s *scope) {
	if s.paused || s.unreported {
		return
	}
	kcp := s.kcp
	st := &kcp.Status
	set := func(c metav1.Condition) { c.ObservedGeneration = kcp.Generation; conditions.Set(kcp, c) }
	clusterName := kcp.Name
	if s.cluster != nil {
		clusterName = s.cluster.Name
	}
	st.Selector = labels.SelectorFromSet(labels.Set{
		clusterv1.ClusterNameLabel:             clusterName,
		clusterv1.MachineControlPlaneNameLabel: kcp.Name,
	}).String()
	st.ObservedGeneration = kcp.Generation

	if s.machinesRead {
		var ready, available, upToDate int32
		var versions []*version.Version
		for _, m := range s.machines {
			going := !m.machine.DeletionTimestamp.IsZero()
			if !going && conditions.IsTrue(m.machine, clusterv1.ReadyCondition) {
				ready++
			}
			if !going && conditions.IsTrue(m.machine, clusterv1.AvailableCondition) {
				available++
			}
			if len(m.outdated) == 0 && m.machine.DeletionTimestamp.IsZero() {
				upToDate++
			}
			if v, err := version.ParseSemantic(m.machine.Spec.Version); err == nil {
				versions = append(versions, v)
			}
		}
		st.Replicas = ptr.To(int32(len(s.machines)))
		st.ReadyReplicas, st.AvailableReplicas, st.UpToDateReplicas = &ready, &available, &upToDate
		machines := make([]*clusterv1.Machine, 0, len(s.machines))
		for _, m := range s.machines {
			machines = append(machines, m.machine)
		}
		st.Versions = plan.CountVersions(machines)
		if len(versions) > 0 && len(versions) == len(s.machines) {
			sort.Slice(versions, func(i, j int) bool { return versions[i].LessThan(versions[j]) })
			st.Version = "v" + versions[0].String()
		}
	}

	if s.initialized || ptrTrue(st.Initialization.ControlPlaneInitialized) {
		st.Initialization.ControlPlaneInitialized = ptr.To(true)
		set(metav1.Condition{Type: controlplanev1.KubeadmControlPlaneInitializedCondition, Status: metav1.ConditionTrue, Reason: initializedReason})
	} else {
		st.Initialization.ControlPlaneInitialized = ptr.To(false)
		msg := s.waitingFor
		if msg == "" {
			msg = "waiting for the first control-plane Machine to run kubeadm init"
		}
		set(metav1.Condition{Type: controlplanev1.KubeadmControlPlaneInitializedCondition, Status: metav1.ConditionFalse, Reason: notInitializedReason, Message: msg})
	}

	switch {
	case s.certsErr != nil:
		set(metav1.Condition{Type: controlplanev1.KubeadmControlPlaneCertificatesAvailableCondition, Status: metav1.ConditionFalse, Reason: certificatesError, Message: s.certsErr.Error()})
	case s.certs != nil:
		set(metav1.Condition{Type: controlplanev1.KubeadmControlPlaneCertificatesAvailableCondition, Status: metav1.ConditionTrue, Reason: certificatesAvailable})
	}

	r.healthConditions(s, set)
	r.scalingConditions(s, set)
	if s.machinesRead {
		set(remediatingCondition(s))
	}

	if kcp.DeletionTimestamp.IsZero() {
		set(metav1.Condition{Type: controlplanev1.KubeadmControlPlaneDeletingCondition, Status: metav1.ConditionFalse, Reason: clusterv1.NotDeletingReason})
	} else {
		set(metav1.Condition{Type: controlplanev1.KubeadmControlPlaneDeletingCondition, Status: metav1.ConditionTrue, Reason: clusterv1.DeletingReason, Message: s.deleting})
	}
}

func (r *Reconciler) healthConditions(s *scope, set func(metav1.Condition)) {
	// The status remembers an initialization this reconcile could not
	// confirm because the cluster could not be asked; that is reported
	// below, not taken for a cluster still coming up.
	if !s.initialized && (s.workloadErr == nil || !ptrTrue(s.kcp.Status.Initialization.ControlPlaneInitialized)) {
		return
	}
	if s.workloadErr != nil {
		// Nothing read from the cluster is current: no condition reports
		// counts, each says it cannot know and why.
		reason := clusterv1.InspectionFailedReason
		if errors.Is(s.workloadErr, workload.ErrClusterNotConnected) {
			reason = clusterv1.ConnectionDownReason
		}
		msg := "cannot reach the workload cluster: " + workloadMessage(s.workloadErr)
		for _, t := range []string{controlplanev1.KubeadmControlPlaneEtcdClusterHealthyCondition, controlplanev1.KubeadmControlPlaneControlPlaneComponentsHealthyCondition} {
			set(metav1.Condition{Type: t, Status: metav1.ConditionUnknown, Reason: reason, Message: msg})
		}
		set(metav1.Condition{Type: controlplanev1.KubeadmControlPlaneAvailableCondition, Status: metav1.ConditionUnknown, Reason: clusterv1.InspectionFailedReason, Message: msg})
		return
	}
	healthyMembers := 0
	switch {
	case s.etcd.err != nil:
		reason := healthUnknownReason
		if errors.Is(s.etcd.err, workload.ErrClusterNotConnected) {
			reason = clusterv1.ConnectionDownReason
		}
		set(metav1.Condition{Type: controlplanev1.KubeadmControlPlaneEtcdClusterHealthyCondition, Status: metav1.ConditionUnknown, Reason: reason, Message: s.etcd.err.Error()})
	case s.etcd.read:
		var problems []string
		for _, m := range s.etcd.members {
			if m.healthy {
				healthyMembers++
			} else {
				problems = append(problems, fmt.Sprintf("member %s %s", m.name, m.problem))
			}
		}
		known := map[string]bool{}
		for _, m := range s.machines {
			known[m.nodeName()] = true
			if s.etcd.member(m.nodeName()) == nil && m.machine.DeletionTimestamp.IsZero() && m.machine.Status.NodeRef.Name != "" {
				problems = append(problems, "Machine "+m.machine.Name+" has no etcd member")
			}
		}
		for _, m := range s.etcd.members {
			if !known[m.name] {
				problems = append(problems, "member "+m.name+" belongs to no Machine")
			}
		}
		if len(problems) == 0 {
			set(metav1.Condition{Type: controlplanev1.KubeadmControlPlaneEtcdClusterHealthyCondition, Status: metav1.ConditionTrue, Reason: healthyReason,
				Message: fmt.Sprintf("%d healthy members", healthyMembers)})
		} else {
			set(metav1.Condition{Type: controlplanev1.KubeadmControlPlaneEtcdClusterHealthyCondition, Status: metav1.ConditionFalse, Reason: notHealthyReason, Message: strings.Join(problems, "; ")})
		}
	}
	var problems []string
	healthyAPI := 0
	for _, m := range s.machines {
		h, ok := s.components[m.nodeName()]
		switch {
		case !ok:
			problems = append(problems, "Machine "+m.machine.Name+": no control-plane Pods yet")
		case !h.healthy():
			problems = append(problems, "Machine "+m.machine.Name+": "+strings.Join(h.problems, ", "))
		}
		if ok && !strings.Contains(strings.Join(h.problems, ","), "kube-apiserver") {
			healthyAPI++
		}
	}
	if len(problems) == 0 {
		set(metav1.Condition{Type: controlplanev1.KubeadmControlPlaneControlPlaneComponentsHealthyCondition, Status: metav1.ConditionTrue, Reason: healthyReason})
	} else {
		set(metav1.Condition{Type: controlplanev1.KubeadmControlPlaneControlPlaneComponentsHealthyCondition, Status: metav1.ConditionFalse, Reason: notHealthyReason, Message: strings.Join(problems, "; ")})
	}
	// Available: the API answers through at least one server and etcd has
	// a healthy majority. Members that could not be listed are not zero
	// members: the condition then says it does not know, and why.
	quorum := s.etcd.read && healthyMembers > len(s.etcd.members)/2
	switch {
	case !s.etcd.read:
		msg := "etcd's members have not been read yet"
		if s.etcd.err != nil {
			msg = s.etcd.err.Error()
		}
		set(metav1.Condition{Type: controlplanev1.KubeadmControlPlaneAvailableCondition, Status: metav1.ConditionUnknown, Reason: clusterv1.InspectionFailedReason, Message: msg})
	case quorum && healthyAPI > 0:
		set(metav1.Condition{Type: controlplanev1.KubeadmControlPlaneAvailableCondition, Status: metav1.ConditionTrue, Reason: clusterv1.AvailableReason})
	default:
		set(metav1.Condition{Type: controlplanev1.KubeadmControlPlaneAvailableCondition, Status: metav1.ConditionFalse, Reason: clusterv1.NotAvailableReason,
			Message: fmt.Sprintf("%d healthy etcd members of %d, %d healthy API servers", healthyMembers, len(s.etcd.members), healthyAPI)})
	}
}

// workloadMessage is what an error reaching the workload cluster says is
// wrong, without the cluster's name the control plane already gives.
func workloadMessage(err error) string {
	var nc *workload.NotConnectedError
	if errors.As(err, &nc) {
		return nc.Message
	}
	return err.Error()
}

func (r *Reconciler) scalingConditions(s *scope, set func(metav1.Condition)) {
	if !s.machinesRead {
		return
	}
	want := int(ptr.Deref(s.kcp.Spec.Replicas, 1))
	have := len(s.machines)
	var outdated []string
	for _, m := range s.machines {
		if len(m.outdated) > 0 {
			outdated = append(outdated, m.machine.Name+" ("+strings.Join(m.outdated, ", ")+")")
		}
	}
	blocked := ""
	if s.action.Kind == plan.ControlPlaneWait {
		blocked = s.action.Reason
	}
	if s.actionErr != nil {
		blocked = s.actionErr.Error()
	} else if s.waitingFor != "" {
		blocked = s.waitingFor
	}
	if have < want {
		set(metav1.Condition{Type: controlplanev1.KubeadmControlPlaneScalingUpCondition, Status: metav1.ConditionTrue, Reason: clusterv1.ScalingUpReason,
			Message: joinNonEmpty(fmt.Sprintf("scaling up from %d to %d replicas", have, want), blocked)})
	} else {
		set(metav1.Condition{Type: controlplanev1.KubeadmControlPlaneScalingUpCondition, Status: metav1.ConditionFalse, Reason: clusterv1.NotScalingUpReason})
	}
	if have > want+boolInt(len(outdated) > 0)*maxSurge(s.kcp) || (have > want && len(outdated) == 0) {
		set(metav1.Condition{Type: controlplanev1.KubeadmControlPlaneScalingDownCondition, Status: metav1.ConditionTrue, Reason: clusterv1.ScalingDownReason,
			Message: joinNonEmpty(fmt.Sprintf("scaling down from %d to %d replicas", have, want), blocked)})
	} else {
		set(metav1.Condition{Type: controlplanev1.KubeadmControlPlaneScalingDownCondition, Status: metav1.ConditionFalse, Reason: clusterv1.NotScalingDownReason})
	}
	if len(outdated) > 0 {
		set(metav1.Condition{Type: controlplanev1.KubeadmControlPlaneRollingOutCondition, Status: metav1.ConditionTrue, Reason: clusterv1.RollingOutReason,
			Message: joinNonEmpty(fmt.Sprintf("rolling out %d not up-to-date Machines: %s", len(outdated), strings.Join(outdated, "; ")), blocked)})
		set(metav1.Condition{Type: controlplanev1.KubeadmControlPlaneMachinesUpToDateCondition, Status: metav1.ConditionFalse, Reason: clusterv1.NotUpToDateReason,
			Message: strings.Join(outdated, "; ")})
	} else {
		set(metav1.Condition{Type: controlplanev1.KubeadmControlPlaneRollingOutCondition, Status: metav1.ConditionFalse, Reason: clusterv1.NotRollingOutReason})
		set(metav1.Condition{Type: controlplanev1.KubeadmControlPlaneMachinesUpToDateCondition, Status: metav1.ConditionTrue, Reason: clusterv1.UpToDateReason})
	}
	var notReady []string
	for _, m := range s.machines {
		if !conditions.IsTrue(m.machine, clusterv1.ReadyCondition) {
			notReady = append(notReady, m.machine.Name)
		}
	}
	switch {
	case have == 0:
		set(metav1.Condition{Type: controlplanev1.KubeadmControlPlaneMachinesReadyCondition, Status: metav1.ConditionTrue, Reason: clusterv1.NoReplicasReason})
	case len(notReady) > 0:
		set(metav1.Condition{Type: controlplanev1.KubeadmControlPlaneMachinesReadyCondition, Status: metav1.ConditionFalse, Reason: clusterv1.NotReadyReason,
			Message: "not ready: " + strings.Join(notReady, ", ")})
	default:
		set(metav1.Condition{Type: controlplanev1.KubeadmControlPlaneMachinesReadyCondition, Status: metav1.ConditionTrue, Reason: clusterv1.ReadyReason})
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func joinNonEmpty(a, b string) string {
	if b == "" {
		return a
	}
	return a + "; " + b
}
