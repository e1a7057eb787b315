package machinedeployment

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/conditions"
	"capstan.dev/capstan/internal/plan"
)

// Reasons of the MachineDeployment's own conditions.
const (
	// RolloutBlockedReason: the rollout cannot be planned; the message says
	// what to change.
	RolloutBlockedReason = "RolloutBlocked"
	// RolloutPausedReason: spec.paused holds back the rollout.
	RolloutPausedReason = "RolloutPaused"
	// WaitingForClusterReason: the MachineDeployment's Cluster does not exist.
	WaitingForClusterReason = "WaitingForCluster"
)

// maxNamesInMessage caps the Machine names a condition message lists.
const maxNamesInMessage = 3

// counts are the replica counters summed over the MachineSets.
type counts struct {
	replicas, ready, available, upToDate int32
	// outdated counts Machines that are not up to date: every Machine of an
	// old set, and those of an up-to-date set that its status does not
	// count as up to date.
	outdated int32
}

func sum(s *scope) counts {
	var c counts
	for _, ms := range s.sets {
		st := &ms.Status
		replicas := ptr.Deref(st.Replicas, 0)
		c.replicas += replicas
		c.ready += ptr.Deref(st.ReadyReplicas, 0)
		c.available += ptr.Deref(st.AvailableReplicas, 0)
		if s.upToDate[ms.Name] {
			upToDate := ptr.Deref(st.UpToDateReplicas, 0)
			c.upToDate += upToDate
			c.outdated += max(0, replicas-upToDate)
		} else {
			c.outdated += replicas
		}
	}
	return c
}

// summarize writes what the reconcile learned into the status: counters,
// selector, phase and conditions.
func (r *Reconciler) summarize(s *scope) {
	if s.paused {
		return
	}
	md := s.md
	md.Status.ObservedGeneration = md.Generation
	if sel, err := selectorOf(md); err == nil && !sel.Empty() {
		md.Status.Selector = sel.String()
	}
	set := func(c metav1.Condition) { conditions.Set(md, c) }

	if rolloutPaused(md) && !s.paused {
		set(metav1.Condition{Type: clusterv1.PausedCondition, Status: metav1.ConditionTrue, Reason: RolloutPausedReason,
			Message: "spec.paused is true: the MachineDeployment still scales, but template changes wait until it is unset"})
	}
	if md.DeletionTimestamp.IsZero() {
		set(metav1.Condition{Type: clusterv1.DeletingCondition, Status: metav1.ConditionFalse, Reason: clusterv1.NotDeletingReason})
	} else {
		set(metav1.Condition{Type: clusterv1.DeletingCondition, Status: metav1.ConditionTrue, Reason: clusterv1.DeletingReason, Message: s.deleting})
	}

	if !s.setsRead {
		// Without the sets nothing can be counted. A missing Cluster is
		// said; after a passing error the last report stands until the
		// retry, rather than flapping.
		if s.waiting != "" {
			for _, t := range []string{clusterv1.AvailableCondition, clusterv1.RollingOutCondition, clusterv1.ScalingUpCondition,
				clusterv1.ScalingDownCondition, clusterv1.MachinesReadyCondition, clusterv1.MachinesUpToDateCondition, clusterv1.RemediatingCondition} {
				set(metav1.Condition{Type: t, Status: metav1.ConditionUnknown, Reason: WaitingForClusterReason, Message: s.waiting})
			}
		}
		if md.Status.Phase == "" {
			md.Status.Phase = string(clusterv1.MachineDeploymentPhaseUnknown)
		}
		return
	}

	c := sum(s)
	md.Status.Replicas = ptr.To(c.replicas)
	md.Status.ReadyReplicas = ptr.To(c.ready)
	md.Status.AvailableReplicas = ptr.To(c.available)
	md.Status.UpToDateReplicas = ptr.To(c.upToDate)
	versions := make([][]clusterv1.StatusVersion, 0, len(s.sets))
	for _, ms := range s.sets {
		versions = append(versions, ms.Status.Versions)
	}
	md.Status.Versions = plan.SumVersions(versions...)

	desired := ptr.Deref(md.Spec.Replicas, 0)
	if !md.DeletionTimestamp.IsZero() {
		desired = 0
	}
	set(availableCondition(md, c))
	set(r.rollingOutCondition(s, c))
	set(scalingCondition(s, c, desired, true))
	set(scalingCondition(s, c, desired, false))
	set(machinesReadyCondition(s))
	set(machinesUpToDateCondition(s))
	set(remediatingCondition(s))

	switch {
	case c.replicas < desired:
		md.Status.Phase = string(clusterv1.MachineDeploymentPhaseScalingUp)
	case c.replicas > desired:
		md.Status.Phase = string(clusterv1.MachineDeploymentPhaseScalingDown)
	default:
		md.Status.Phase = string(clusterv1.MachineDeploymentPhaseRunning)
	}
}

func availableCondition(md *clusterv1.MachineDeployment, c counts) metav1.Condition {
	desired := ptr.Deref(md.Spec.Replicas, 0)
	unavailable := maxUnavailable(md)
	need := max(0, desired-unavailable)
	cond := metav1.Condition{Type: clusterv1.AvailableCondition}
	switch {
	case c.available >= need:
		cond.Status, cond.Reason = metav1.ConditionTrue, clusterv1.AvailableReason
	case !md.DeletionTimestamp.IsZero():
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, clusterv1.NotAvailableReason, "the MachineDeployment is being deleted"
	default:
		cond.Status, cond.Reason = metav1.ConditionFalse, clusterv1.NotAvailableReason
		cond.Message = fmt.Sprintf("%d available %s, at least %d required (spec.replicas is %d, maxUnavailable is %d)",
			c.available, plural(int(c.available), "replica"), need, desired, unavailable)
	}
	return cond
}

func (r *Reconciler) rollingOutCondition(s *scope, c counts) metav1.Condition {
	md := s.md
	cond := metav1.Condition{Type: clusterv1.RollingOutCondition}
	if s.planErr != nil {
		cond.Status, cond.Reason = metav1.ConditionUnknown, RolloutBlockedReason
		cond.Message = "the rollout cannot be planned: " + s.planErr.Error()
		return cond
	}
	if c.outdated == 0 {
		cond.Status, cond.Reason = metav1.ConditionFalse, clusterv1.NotRollingOutReason
		if rolloutPaused(md) && s.current == nil && len(s.sets) > 0 {
			cond.Message = "spec.paused is true: the template change is not rolled out until it is unset"
		}
		return cond
	}
	cond.Status, cond.Reason = metav1.ConditionTrue, clusterv1.RollingOutReason
	msg := fmt.Sprintf("Rolling out %d not up-to-date %s", c.outdated, plural(int(c.outdated), "replica"))
	var reasons []string
	add := func(r string) {
		if !slices.Contains(reasons, r) {
			reasons = append(reasons, r)
		}
	}
	after := md.Spec.Rollout.After
	for _, ms := range s.sets {
		if s.upToDate[ms.Name] || ptr.Deref(ms.Status.Replicas, 0) == 0 {
			continue
		}
		if plan.TemplateUpToDate(&ms.Spec.Template, &md.Spec.Template) {
			if plan.OutdatedByRolloutAfter(ms.CreationTimestamp.Time, after.Time, s.now) {
				add("MachineSets created before rollout.after " + after.UTC().Format("2006-01-02T15:04:05Z"))
			}
			continue
		}
		for _, change := range plan.TemplateChanges(&ms.Spec.Template, &md.Spec.Template) {
			add(change)
		}
	}
	for _, reason := range reasons {
		msg += "\n* " + reason
	}
	if rolloutPaused(md) {
		msg += "\n* paused by spec.paused: no Machine is replaced until it is unset"
	}
	cond.Message = msg
	return cond
}

// scalingCondition is ScalingUp (up set) or ScalingDown.
func scalingCondition(s *scope, c counts, desired int32, up bool) metav1.Condition {
	cond := metav1.Condition{Type: clusterv1.ScalingDownCondition, Status: metav1.ConditionFalse, Reason: clusterv1.NotScalingDownReason}
	scaling := c.replicas > desired
	if up {
		cond = metav1.Condition{Type: clusterv1.ScalingUpCondition, Status: metav1.ConditionFalse, Reason: clusterv1.NotScalingUpReason}
		scaling = c.replicas < desired
	}
	if !scaling {
		return cond
	}
	cond.Status = metav1.ConditionTrue
	cond.Reason = clusterv1.ScalingDownReason
	verb := "down"
	if up {
		cond.Reason, verb = clusterv1.ScalingUpReason, "up"
	}
	cond.Message = fmt.Sprintf("Scaling %s from %d to %d replicas", verb, c.replicas, desired)
	if s.planErr != nil {
		cond.Message += " is blocked: " + s.planErr.Error()
	} else if up && rolloutPaused(s.md) && s.scaled == nil {
		cond.Message += " is blocked: spec.paused is true and no MachineSet exists yet"
	}
	return cond
}

// machineGroups collects Machine names by the status one of their
// conditions has.
type machineGroups struct {
	falseNames, unknownNames []string
	total                    int
}

func (g *machineGroups) add(name string, status metav1.ConditionStatus) {
	g.total++
	switch status {
	case metav1.ConditionTrue:
	case metav1.ConditionFalse:
		g.falseNames = append(g.falseNames, name)
	default:
		g.unknownNames = append(g.unknownNames, name)
	}
}

func machinesReadyCondition(s *scope) metav1.Condition {
	var g machineGroups
	for _, m := range s.allMachines {
		g.add(m.Name, conditionStatus(m, clusterv1.ReadyCondition))
	}
	cond := metav1.Condition{Type: clusterv1.MachinesReadyCondition}
	switch {
	case g.total == 0:
		cond.Status, cond.Reason = metav1.ConditionTrue, clusterv1.NoReplicasReason
	case len(g.falseNames) > 0:
		cond.Status, cond.Reason = metav1.ConditionFalse, clusterv1.NotReadyReason
		cond.Message = listMachines(g.falseNames, "not Ready")
	case len(g.unknownNames) > 0:
		cond.Status, cond.Reason = metav1.ConditionUnknown, clusterv1.ReadyUnknownReason
		cond.Message = listMachines(g.unknownNames, "not reporting Ready")
	default:
		cond.Status, cond.Reason = metav1.ConditionTrue, clusterv1.ReadyReason
	}
	return cond
}

// machinesUpToDateCondition summarises the Machines' UpToDate conditions;
// the Machines of old sets are outdated whatever they report, since their
// set's template is not the MachineDeployment's.
func machinesUpToDateCondition(s *scope) metav1.Condition {
	var g machineGroups
	for _, ms := range s.sets {
		for _, m := range s.machines[ms.Name] {
			status := conditionStatus(m, clusterv1.UpToDateCondition)
			if !s.upToDate[ms.Name] {
				status = metav1.ConditionFalse
			}
			g.add(m.Name, status)
		}
	}
	cond := metav1.Condition{Type: clusterv1.MachinesUpToDateCondition}
	switch {
	case g.total == 0:
		cond.Status, cond.Reason = metav1.ConditionTrue, clusterv1.NoReplicasReason
	case len(g.falseNames) > 0:
		cond.Status, cond.Reason = metav1.ConditionFalse, clusterv1.NotUpToDateReason
		cond.Message = listMachines(g.falseNames, "not up to date")
	case len(g.unknownNames) > 0:
		cond.Status, cond.Reason = metav1.ConditionUnknown, clusterv1.UpToDateUnknownReason
		cond.Message = listMachines(g.unknownNames, "not reporting UpToDate")
	default:
		cond.Status, cond.Reason = metav1.ConditionTrue, clusterv1.UpToDateReason
	}
	return cond
}

// remediatingCondition is True while Machines wait for their MachineSet to
// replace them after a MachineHealthCheck found them unhealthy.
func remediatingCondition(s *scope) metav1.Condition {
	var remediating, unhealthy []string
	for _, m := range s.allMachines {
		switch {
		case conditionStatus(m, clusterv1.OwnerRemediatedCondition) == metav1.ConditionFalse:
			remediating = append(remediating, m.Name)
		case conditionStatus(m, clusterv1.HealthCheckSucceededCondition) == metav1.ConditionFalse:
			unhealthy = append(unhealthy, m.Name)
		}
	}
	cond := metav1.Condition{Type: clusterv1.RemediatingCondition, Status: metav1.ConditionFalse, Reason: clusterv1.NotRemediatingReason}
	switch {
	case len(remediating) > 0:
		cond.Status, cond.Reason = metav1.ConditionTrue, clusterv1.RemediatingReason
		cond.Message = listMachines(remediating, "being remediated")
	case len(unhealthy) > 0:
		cond.Message = listMachines(unhealthy, "unhealthy, not remediated by their MachineSet")
	}
	return cond
}

// listMachines says which Machines are in a state, naming a few.
func listMachines(names []string, state string) string {
	slices.Sort(names)
	shown := names
	if len(shown) > maxNamesInMessage {
		shown = shown[:maxNamesInMessage]
	}
	msg := fmt.Sprintf("%d %s %s %s: %s", len(names), plural(len(names), "Machine"), isAre(len(names)), state, strings.Join(shown, ", "))
	if more := len(names) - len(shown); more > 0 {
		msg += fmt.Sprintf(" and %d more", more)
	}
	return msg
}

func plural(n int, noun string) string {
	if n == 1 {
		return noun
	}
	return noun + "s"
}

func isAre(n int) string {
	if n == 1 {
		return "is"
	}
	return "are"
}
