package plan

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// ControlPlaneMachine is what the control-plane decision needs to know about
// one of its Machines.
type ControlPlaneMachine struct {
	Name          string
	FailureDomain string
	Created       time.Time
	// UpToDate is false when the Machine no longer matches the control
	// plane's spec (version, templates, kubeadm configuration, rollout.after,
	// certificate expiry).
	UpToDate bool
	// Deleting is true once the Machine has a deletion timestamp.
	Deleting bool
	// MarkedForDeletion carries the delete-machine annotation: chosen first
	// when scaling down.
	MarkedForDeletion bool
	// EtcdMember is true when the Machine's etcd member is in the cluster;
	// EtcdHealthy when that member answers.
	EtcdMember, EtcdHealthy bool
	// ComponentsHealthy is true when its API server, controller manager and
	// scheduler report healthy.
	ComponentsHealthy bool
	// NeedsRemediation is true when a health check asked the control plane
	// to replace the Machine (OwnerRemediated=False).
	NeedsRemediation bool
	// RemediationRetry counts the remediations in a row this Machine's
	// failure would be: 0 for a Machine that was healthy for long enough,
	// one more than its predecessor's count for a replacement that failed
	// within the minimum healthy period.
	RemediationRetry int
}

// ControlPlaneRemediation are the limits on replacing unhealthy Machines.
type ControlPlaneRemediation struct {
	// MaxRetry, when set, is how many remediations in a row a failing
	// Machine's replacements may get.
	MaxRetry *int
	// RetryPeriod is the least time between a remediation and the next
	// retry of the same failure.
	RetryPeriod time.Duration
	// Last is when the control plane last remediated a Machine; Now is the
	// clock.
	Last, Now time.Time
}

// ControlPlaneState is the input of DecideControlPlane.
type ControlPlaneState struct {
	Replicas int
	// MaxSurge is 0 or 1: how many Machines above Replicas a rollout may add.
	MaxSurge    int
	Initialized bool
	Machines    []ControlPlaneMachine
	// FailureDomains are the names of the Cluster's failure domains that may
	// host control-plane Machines.
	FailureDomains []string
	// EtcdMembers is the number of members etcd reports, including members
	// that belong to no Machine (left over by a failure); -1 when etcd could
	// not be asked.
	EtcdMembers int
	Remediation ControlPlaneRemediation
}

// ControlPlaneActionKind names what the control plane should do next.
type ControlPlaneActionKind string

const (
	// ControlPlaneWait: nothing may be done now; Reason says why.
	ControlPlaneWait ControlPlaneActionKind = "Wait"
	// ControlPlaneSteady: the control plane has what it should.
	ControlPlaneSteady ControlPlaneActionKind = "Steady"
	// ControlPlaneInit creates the first Machine, which initialises the cluster.
	ControlPlaneInit ControlPlaneActionKind = "Init"
	// ControlPlaneScaleUp creates one Machine that joins.
	ControlPlaneScaleUp ControlPlaneActionKind = "ScaleUp"
	// ControlPlaneScaleDown deletes Machine.
	ControlPlaneScaleDown ControlPlaneActionKind = "ScaleDown"
	// ControlPlaneRemediate deletes the unhealthy Machine; a later step
	// replaces it.
	ControlPlaneRemediate ControlPlaneActionKind = "Remediate"
)

// ControlPlaneAction is the one step DecideControlPlane chooses. A control
// plane changes one Machine at a time: every step changes etcd's membership,
// and the next is decided only once the cluster is healthy again.
type ControlPlaneAction struct {
	Kind ControlPlaneActionKind
	// FailureDomain is where to create the Machine (Init, ScaleUp).
	FailureDomain string
	// Machine is the Machine to delete (ScaleDown).
	Machine string
	// RollingOut is true when the step is part of replacing outdated
	// Machines.
	RollingOut bool
	// Remediating is true while Machines wait for remediation; with Kind
	// Wait, Reason says why they may not be remediated now, and RetryAt,
	// when set, is when that changes.
	Remediating bool
	RetryAt     time.Time
	// Reason explains the choice, or why nothing may be done.
	Reason string
}

// DecideControlPlane chooses the control plane's next step. Rules:
//   - nothing is done while a Machine is being deleted;
//   - the first Machine initialises; no other is created until the control
//     plane is initialized;
//   - a Machine is added only when every Machine is healthy (etcd member
//     and components), so a join never lands on a sick cluster;
//   - a Machine is removed only when the etcd members left keep a healthy
//     majority;
//   - a rollout adds an up-to-date Machine first when MaxSurge allows, then
//     removes an outdated one; with MaxSurge 0 it removes first;
//   - a new Machine goes to the failure domain with the fewest up-to-date
//     Machines; a removed one is taken from the failure domain with the most.
func DecideControlPlane(s ControlPlaneState) ControlPlaneAction {
	for _, m := range s.Machines {
		if m.Deleting {
			return ControlPlaneAction{Kind: ControlPlaneWait, Reason: fmt.Sprintf("waiting for Machine %s to be deleted", m.Name)}
		}
	}
	if a, ok := s.remediate(); ok {
		return a
	}
	n := len(s.Machines)
	if n == 0 {
		if s.Replicas == 0 {
			return ControlPlaneAction{Kind: ControlPlaneSteady}
		}
		return ControlPlaneAction{Kind: ControlPlaneInit, FailureDomain: s.placement(), Reason: "creating the first control-plane Machine"}
	}
	if !s.Initialized {
		return ControlPlaneAction{Kind: ControlPlaneWait, Reason: "waiting for the first control-plane Machine to initialise the cluster"}
	}
	var outdated []ControlPlaneMachine
	for _, m := range s.Machines {
		if !m.UpToDate {
			outdated = append(outdated, m)
		}
	}
	switch {
	case len(outdated) > 0 && n < s.Replicas+s.MaxSurge:
		return s.scaleUp(true, fmt.Sprintf("rolling out: %d of %d Machines are outdated", len(outdated), n))
	case len(outdated) > 0 && n == 1:
		return ControlPlaneAction{Kind: ControlPlaneWait, RollingOut: true,
			Reason: "the only control-plane Machine is outdated and maxSurge is 0: replacing it would stop the cluster; set spec.rollout.strategy.rollingUpdate.maxSurge to 1"}
	case len(outdated) > 0:
		return s.scaleDown(outdated, true, fmt.Sprintf("rolling out: %d of %d Machines are outdated", len(outdated), n))
	case n < s.Replicas:
		return s.scaleUp(false, fmt.Sprintf("scaling up from %d to %d", n, s.Replicas))
	case n > s.Replicas:
		return s.scaleDown(s.Machines, false, fmt.Sprintf("scaling down from %d to %d", n, s.Replicas))
	}
	return ControlPlaneAction{Kind: ControlPlaneSteady}
}

// remediate decides about Machines a health check marked: one at a time,
// never the last etcd member, never when the members left would lose their
// healthy majority, within maxRetry and retryPeriod. It reports false when
// no Machine needs remediation.
func (s ControlPlaneState) remediate() (ControlPlaneAction, bool) {
	var candidates []ControlPlaneMachine
	for _, m := range s.Machines {
		if m.NeedsRemediation && !m.Deleting {
			candidates = append(candidates, m)
		}
	}
	if len(candidates) == 0 {
		return ControlPlaneAction{}, false
	}
	// Machines whose etcd is sickest go first; then the oldest.
	victim := slices.MinFunc(candidates, func(a, b ControlPlaneMachine) int {
		if c := cmp.Compare(rank(a), rank(b)); c != 0 {
			return c
		}
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return cmp.Compare(a.Name, b.Name)
	})
	wait := func(why string) (ControlPlaneAction, bool) {
		return ControlPlaneAction{Kind: ControlPlaneWait, Machine: victim.Name, Remediating: true,
			Reason: "cannot remediate Machine " + victim.Name + ": " + why}, true
	}
	r := s.Remediation
	if r.MaxRetry != nil && victim.RemediationRetry > *r.MaxRetry {
		return wait(fmt.Sprintf("it replaces Machines that failed %d times in a row, more than spec.remediation.maxRetry (%d); fix the cause, then delete it by hand", victim.RemediationRetry, *r.MaxRetry))
	}
	if victim.RemediationRetry > 0 && !r.Last.IsZero() && r.Now.Before(r.Last.Add(r.RetryPeriod)) {
		a, _ := wait(fmt.Sprintf("the last remediation was at %s and spec.remediation.retryPeriodSeconds asks to wait until %s",
			r.Last.UTC().Format(time.RFC3339), r.Last.Add(r.RetryPeriod).UTC().Format(time.RFC3339)))
		a.RetryAt = r.Last.Add(r.RetryPeriod)
		return a, true
	}
	if s.Initialized && len(s.Machines) <= 1 {
		return wait("it is the control plane's only Machine, and removing it would lose the cluster's only etcd member; scale the control plane to 3 to make it remediable")
	}
	members, healthy := s.membersWithout(victim.Name)
	// A Machine without an etcd member takes none away.
	if s.Initialized && victim.EtcdMember && members > 0 && healthy <= members/2 {
		return wait(fmt.Sprintf("without it etcd would have %d healthy of %d members, which is no quorum", healthy, members))
	}
	return ControlPlaneAction{Kind: ControlPlaneRemediate, Machine: victim.Name, Remediating: true,
		Reason: fmt.Sprintf("Machine %s is unhealthy", victim.Name)}, true
}

func rank(m ControlPlaneMachine) int {
	switch {
	case !m.EtcdMember:
		return 0
	case !m.EtcdHealthy:
		return 1
	}
	return 2
}

func (s ControlPlaneState) scaleUp(rolling bool, why string) ControlPlaneAction {
	if sick := s.unhealthy(""); len(sick) > 0 {
		return ControlPlaneAction{Kind: ControlPlaneWait, RollingOut: rolling,
			Reason: why + "; waiting before adding a Machine: " + strings.Join(sick, "; ")}
	}
	return ControlPlaneAction{Kind: ControlPlaneScaleUp, FailureDomain: s.placement(), RollingOut: rolling, Reason: why}
}

func (s ControlPlaneState) scaleDown(candidates []ControlPlaneMachine, rolling bool, why string) ControlPlaneAction {
	victim := s.victim(candidates)
	// The members left must keep a majority that answers. Members etcd
	// knows that belong to no Machine count against it.
	members, healthy := s.membersWithout(victim.Name)
	if members > 0 && healthy <= members/2 {
		return ControlPlaneAction{Kind: ControlPlaneWait, RollingOut: rolling,
			Reason: fmt.Sprintf("%s; removing Machine %s would leave %d healthy of %d etcd members, which is no quorum", why, victim.Name, healthy, members)}
	}
	if sick := s.unhealthy(victim.Name); len(sick) > 0 {
		return ControlPlaneAction{Kind: ControlPlaneWait, RollingOut: rolling,
			Reason: why + "; waiting before removing a Machine: " + strings.Join(sick, "; ")}
	}
	return ControlPlaneAction{Kind: ControlPlaneScaleDown, Machine: victim.Name, RollingOut: rolling, Reason: why}
}

// membersWithout counts the etcd members, and the healthy ones, that would
// be left without the named Machine's. Members etcd knows that belong to no
// Machine count as members that are not healthy.
func (s ControlPlaneState) membersWithout(name string) (members, healthy int) {
	for _, m := range s.Machines {
		if m.Name == name || !m.EtcdMember {
			continue
		}
		members++
		if m.EtcdHealthy {
			healthy++
		}
	}
	if s.EtcdMembers >= 0 {
		members += max(s.EtcdMembers-s.memberCount(), 0)
	}
	return members, healthy
}

func (s ControlPlaneState) memberCount() int {
	n := 0
	for _, m := range s.Machines {
		if m.EtcdMember {
			n++
		}
	}
	return n
}

// unhealthy lists what is wrong with the Machines other than except.
func (s ControlPlaneState) unhealthy(except string) []string {
	var sick []string
	for _, m := range s.Machines {
		if m.Name == except {
			continue
		}
		switch {
		case !m.EtcdMember:
			sick = append(sick, "Machine "+m.Name+" has no etcd member yet")
		case !m.EtcdHealthy:
			sick = append(sick, "the etcd member of Machine "+m.Name+" is not healthy")
		case !m.ComponentsHealthy:
			sick = append(sick, "the control-plane components of Machine "+m.Name+" are not healthy")
		}
	}
	if s.EtcdMembers >= 0 && s.EtcdMembers > s.memberCount() {
		sick = append(sick, fmt.Sprintf("etcd has %d members that belong to no Machine", s.EtcdMembers-s.memberCount()))
	}
	return sick
}

// placement is the failure domain with the fewest up-to-date Machines,
// ties broken by name.
func (s ControlPlaneState) placement() string {
	if len(s.FailureDomains) == 0 {
		return ""
	}
	count := map[string]int{}
	for _, m := range s.Machines {
		if m.UpToDate {
			count[m.FailureDomain]++
		}
	}
	domains := slices.Clone(s.FailureDomains)
	slices.Sort(domains)
	best := domains[0]
	for _, d := range domains[1:] {
		if count[d] < count[best] {
			best = d
		}
	}
	return best
}

// victim picks the Machine to remove among candidates: one marked for
// deletion first, then one from the failure domain holding the most
// Machines, then the oldest, then by name.
func (s ControlPlaneState) victim(candidates []ControlPlaneMachine) ControlPlaneMachine {
	perDomain := map[string]int{}
	for _, m := range s.Machines {
		perDomain[m.FailureDomain]++
	}
	return slices.MinFunc(candidates, func(a, b ControlPlaneMachine) int {
		if a.MarkedForDeletion != b.MarkedForDeletion {
			if a.MarkedForDeletion {
				return -1
			}
			return 1
		}
		if c := cmp.Compare(perDomain[b.FailureDomain], perDomain[a.FailureDomain]); c != 0 {
			return c
		}
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return cmp.Compare(a.Name, b.Name)
	})
}
