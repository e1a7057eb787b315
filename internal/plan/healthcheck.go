package plan

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"
)

// DefaultNodeStartupTimeout is how long a Machine may go without a Node when
// a MachineHealthCheck does not say.
const DefaultNodeStartupTimeout = 600 * time.Second

// Reasons a target is judged unhealthy, as used on the Machine's
// HealthCheckSucceeded condition.
const (
	HealthyReason                   = "HealthCheckSucceeded"
	RemediateAnnotationReason       = "HasRemediateAnnotation"
	NodeDeletedReason               = "NodeDeleted"
	NodeStartupTimeoutReason        = "NodeStartupTimeout"
	UnhealthyNodeReason             = "UnhealthyNode"
	UnhealthyMachineReason          = "UnhealthyMachine"
	RemediationAllowedReason        = "RemediationAllowed"
	TooManyUnhealthyReason          = "TooManyUnhealthy"
	InvalidRemediationTriggerReason = "InvalidRemediationTrigger"
)

// HealthRule is one of a health check's unhealthy conditions: the target is
// unhealthy once a condition of Type has had Status for at least Timeout.
type HealthRule struct {
	Type    string
	Status  string
	Timeout time.Duration
}

// HealthChecks are the checks of a MachineHealthCheck.
type HealthChecks struct {
	NodeConditions    []HealthRule
	MachineConditions []HealthRule
	// NodeStartupTimeout bounds how long a target may go without a Node,
	// counted from its StartedAt; nil means DefaultNodeStartupTimeout, zero
	// turns the check off.
	NodeStartupTimeout *time.Duration
}

// RemediationTrigger limits when remediation may start; the zero value
// always allows it.
type RemediationTrigger struct {
	// UnhealthyLessThanOrEqualTo is a count or a percentage ("40%") of the
	// targets; percentages round down.
	UnhealthyLessThanOrEqualTo *intstr.IntOrString
	// UnhealthyInRange is "[min-max]", bounds included; it wins over
	// UnhealthyLessThanOrEqualTo.
	UnhealthyInRange string
}

// ObservedCondition is a condition as last reported on a Node or Machine.
type ObservedCondition struct {
	Type               string
	Status             string
	LastTransitionTime time.Time
}

// HealthTarget is what the decision needs to know of one checked Machine.
type HealthTarget struct {
	Name string
	// RemediateAnnotation: the Machine carries
	// cluster.x-k8s.io/remediate-machine.
	RemediateAnnotation bool
	// StartedAt is when the node startup timeout starts counting: the
	// latest of the Machine's infrastructure being provisioned (or its
	// creation) and the Cluster's infrastructure and control plane readiness.
	StartedAt time.Time
	// HasNodeRef: the Machine's status names a Node.
	HasNodeRef bool
	// NodeFound: the Node exists in the workload cluster. A target whose
	// NodeRef is set but whose Node is not found lost its Node.
	NodeFound         bool
	NodeConditions    []ObservedCondition
	MachineConditions []ObservedCondition
}

// HealthInput is everything the health decision depends on.
type HealthInput struct {
	Checks  HealthChecks
	Trigger RemediationTrigger
	Targets []HealthTarget
	Now     time.Time
}

// TargetHealth is the verdict on one target.
type TargetHealth struct {
	Name    string
	Healthy bool
	// Reason is one of the *Reason constants; HealthyReason when healthy.
	Reason string
	// FailedCondition names what failed, for example "Ready=False" for a
	// Node condition rule, empty when no condition is at fault.
	FailedCondition string
	// Message explains the verdict to a user.
	Message string
}

// HealthDecision is what a MachineHealthCheck should do now.
type HealthDecision struct {
	// Targets, in input order.
	Targets   []TargetHealth
	Unhealthy int
	// ShortCircuited: remediation must not start, because the number of
	// unhealthy targets is outside what the trigger allows (or the trigger
	// cannot be read); Message says why with the numbers.
	ShortCircuited bool
	Reason         string
	Message        string
	// RemediationsAllowed is how many more targets may become unhealthy
	// before the trigger stops remediation.
	RemediationsAllowed int
	// NextCheck is the earliest time a target judged healthy now would
	// become unhealthy if nothing changes; zero when none would.
	NextCheck time.Time
	// TriggerErr is set when the trigger is malformed.
	TriggerErr error
}

// Healthy is the number of healthy targets.
func (d HealthDecision) Healthy() int { return len(d.Targets) - d.Unhealthy }

// RequeueAfter is how long from now until NextCheck; zero when there is
// nothing to wait for.
func (d HealthDecision) RequeueAfter(now time.Time) time.Duration {
	if d.NextCheck.IsZero() {
		return 0
	}
	if after := d.NextCheck.Sub(now); after > 0 {
		return after
	}
	// Already due: look again straight away rather than never.
	return time.Nanosecond
}

// DecideHealth judges every target and decides whether remediation may
// proceed. A rule matches once its condition has held for at least its
// timeout: exactly at the timeout the target is unhealthy.
func DecideHealth(in HealthInput) HealthDecision {
	d := HealthDecision{Targets: make([]TargetHealth, 0, len(in.Targets))}
	for _, t := range in.Targets {
		th, next := judge(in.Checks, t, in.Now)
		if !th.Healthy {
			d.Unhealthy++
		} else if !next.IsZero() && (d.NextCheck.IsZero() || next.Before(d.NextCheck)) {
			d.NextCheck = next
		}
		d.Targets = append(d.Targets, th)
	}
	decideTrigger(in.Trigger, len(in.Targets), &d)
	return d
}

// judge returns the verdict on one target and, when healthy, the earliest
// time a pending rule would fire.
func judge(checks HealthChecks, t HealthTarget, now time.Time) (TargetHealth, time.Time) {
	unhealthy := func(reason, failed, msg string) (TargetHealth, time.Time) {
		return TargetHealth{Name: t.Name, Reason: reason, FailedCondition: failed, Message: msg}, time.Time{}
	}
	if t.RemediateAnnotation {
		return unhealthy(RemediateAnnotationReason, "", "Machine has the cluster.x-k8s.io/remediate-machine annotation")
	}
	var next time.Time
	soonest := func(at time.Time) {
		if next.IsZero() || at.Before(next) {
			next = at
		}
	}
	// check returns the first rule that has fired, noting when pending
	// ones will.
	check := func(rules []HealthRule, observed []ObservedCondition) (HealthRule, ObservedCondition, bool) {
		for _, r := range rules {
			i := slices.IndexFunc(observed, func(c ObservedCondition) bool { return c.Type == r.Type })
			if i < 0 || observed[i].Status != r.Status {
				continue
			}
			due := observed[i].LastTransitionTime.Add(r.Timeout)
			if !now.Before(due) {
				return r, observed[i], true
			}
			soonest(due)
		}
		return HealthRule{}, ObservedCondition{}, false
	}
	if r, c, fired := check(checks.MachineConditions, t.MachineConditions); fired {
		return unhealthy(UnhealthyMachineReason, r.Type+"="+r.Status,
			fmt.Sprintf("Machine condition %s has been %s since %s, at least %s",
				r.Type, r.Status, c.LastTransitionTime.UTC().Format(time.RFC3339), r.Timeout))
	}
	switch {
	case t.HasNodeRef && !t.NodeFound:
		return unhealthy(NodeDeletedReason, "", "Machine's Node has been deleted")
	case !t.NodeFound:
		timeout := DefaultNodeStartupTimeout
		if checks.NodeStartupTimeout != nil {
			timeout = *checks.NodeStartupTimeout
		}
		if timeout > 0 && !t.StartedAt.IsZero() {
			due := t.StartedAt.Add(timeout)
			if !now.Before(due) {
				return unhealthy(NodeStartupTimeoutReason, "",
					fmt.Sprintf("Machine has had no Node for %s since %s", timeout, t.StartedAt.UTC().Format(time.RFC3339)))
			}
			soonest(due)
		}
	default:
		if r, c, fired := check(checks.NodeConditions, t.NodeConditions); fired {
			return unhealthy(UnhealthyNodeReason, r.Type+"="+r.Status,
				fmt.Sprintf("Node condition %s has been %s since %s, at least %s",
					r.Type, r.Status, c.LastTransitionTime.UTC().Format(time.RFC3339), r.Timeout))
		}
	}
	return TargetHealth{Name: t.Name, Healthy: true, Reason: HealthyReason}, next
}

// decideTrigger fills in the short-circuit verdict and the remediation
// budget.
func decideTrigger(tr RemediationTrigger, total int, d *HealthDecision) {
	n := d.Unhealthy
	switch {
	case tr.UnhealthyInRange != "":
		lo, hi, err := ParseUnhealthyRange(tr.UnhealthyInRange)
		if err != nil {
			d.invalid(err)
			return
		}
		if n < lo || n > hi {
			d.shortCircuit(fmt.Sprintf("Remediation is not allowed: %d of %d Machines are unhealthy, outside unhealthyInRange %s", n, total, tr.UnhealthyInRange))
			return
		}
		d.allow(hi-n, fmt.Sprintf("%d of %d Machines are unhealthy, within unhealthyInRange %s", n, total, tr.UnhealthyInRange))
	case tr.UnhealthyLessThanOrEqualTo != nil:
		limit, err := unhealthyLimit(*tr.UnhealthyLessThanOrEqualTo, total)
		if err != nil {
			d.invalid(err)
			return
		}
		spelled := tr.UnhealthyLessThanOrEqualTo.String()
		if tr.UnhealthyLessThanOrEqualTo.Type == intstr.String {
			spelled = fmt.Sprintf("%s (%d of %d)", spelled, limit, total)
		}
		if n > limit {
			d.shortCircuit(fmt.Sprintf("Remediation is not allowed: %d of %d Machines are unhealthy, more than unhealthyLessThanOrEqualTo %s", n, total, spelled))
			return
		}
		d.allow(limit-n, fmt.Sprintf("%d of %d Machines are unhealthy, at most unhealthyLessThanOrEqualTo %s", n, total, spelled))
	default:
		d.allow(total-n, fmt.Sprintf("%d of %d Machines are unhealthy", n, total))
	}
}

func (d *HealthDecision) allow(budget int, msg string) {
	d.RemediationsAllowed = max(budget, 0)
	d.Reason = RemediationAllowedReason
	d.Message = msg
}

func (d *HealthDecision) shortCircuit(msg string) {
	d.ShortCircuited = true
	d.RemediationsAllowed = 0
	d.Reason = TooManyUnhealthyReason
	d.Message = msg
}

func (d *HealthDecision) invalid(err error) {
	d.ShortCircuited = true
	d.RemediationsAllowed = 0
	d.TriggerErr = err
	d.Reason = InvalidRemediationTriggerReason
	d.Message = "Remediation is not allowed: " + err.Error()
}

// unhealthyLimit turns a count or a percentage of total into a count; a
// percentage rounds down, so "40%" of 3 is 1.
func unhealthyLimit(v intstr.IntOrString, total int) (int, error) {
	if v.Type == intstr.Int {
		if v.IntVal < 0 {
			return 0, fmt.Errorf("unhealthyLessThanOrEqualTo %d must not be negative", v.IntVal)
		}
		return int(v.IntVal), nil
	}
	s, ok := strings.CutSuffix(v.StrVal, "%")
	p, err := strconv.Atoi(s)
	if !ok || err != nil || p < 0 || s == "" || s[0] == '+' || s[0] == '-' {
		return 0, fmt.Errorf("unhealthyLessThanOrEqualTo %q must be a non-negative number or a percentage such as 40%%", v.StrVal)
	}
	return p * total / 100, nil
}

// ParseUnhealthyRange reads "[min-max]" with min not above max.
func ParseUnhealthyRange(s string) (lo, hi int, err error) {
	bad := func() (int, int, error) {
		return 0, 0, fmt.Errorf("unhealthyInRange %q must be written [min-max] with min not above max, for example [3-5]", s)
	}
	inner, ok := strings.CutPrefix(s, "[")
	if !ok {
		return bad()
	}
	if inner, ok = strings.CutSuffix(inner, "]"); !ok {
		return bad()
	}
	a, b, ok := strings.Cut(inner, "-")
	if !ok || !digits(a) || !digits(b) {
		return bad()
	}
	if lo, err = strconv.Atoi(a); err != nil {
		return bad()
	}
	if hi, err = strconv.Atoi(b); err != nil {
		return bad()
	}
	if lo > hi {
		return bad()
	}
	return lo, hi, nil
}

func digits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}
