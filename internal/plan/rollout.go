package plan

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"
)

// StrategyType names how a MachineDeployment replaces its Machines. The
// values are the API's, so spec.rollout.strategy.type converts directly.
type StrategyType string

const (
	// RollingUpdate scales the up-to-date MachineSet up and the others down
	// step by step, within maxSurge and maxUnavailable.
	RollingUpdate StrategyType = "RollingUpdate"

	// OnDelete replaces an old Machine only once someone deletes it.
	OnDelete StrategyType = "OnDelete"
)

// RolloutStrategy is a MachineDeployment's spec.rollout.strategy.
type RolloutStrategy struct {
	// Type is RollingUpdate when empty, as the API defaults it.
	Type StrategyType

	// MaxSurge is how many Machines may exist above the desired replicas: a
	// number or a percentage of the desired replicas, rounded up. Nil means
	// the API's default, 1.
	MaxSurge *intstr.IntOrString

	// MaxUnavailable is how many Machines below the desired replicas may be
	// unavailable: a number or a percentage of the desired replicas, rounded
	// down. Nil means the API's default, 0.
	MaxUnavailable *intstr.IntOrString
}

// MachineSetState is what the rollout planner needs to know of one
// MachineSet that belongs to the MachineDeployment.
//
// The planner's guarantees lean on two habits of the MachineSet controller:
// it counts Machines being deleted towards its size (so a set never holds
// more than max(spec.replicas, Machines) Machines), and when it scales down it
// deletes Machines that are not available before available ones (as
// MachinesToDelete does when such Machines are marked NotReady).
type MachineSetState struct {
	Name    string
	Created time.Time

	// UpToDate marks the MachineSet whose template is the MachineDeployment's.
	// Should several be marked, the oldest is the one scaled up and the others
	// are treated as old.
	UpToDate bool

	// Replicas is the set's spec.replicas.
	Replicas int32

	// Machines counts every Machine the set owns: those being created, those
	// running, and those being deleted.
	Machines int32

	// Available counts the set's Machines that are available and not being
	// deleted.
	Available int32

	// Deleting counts the set's Machines being deleted.
	Deleting int32
}

// RolloutInput is everything the rollout planner decides from. Time enters
// only through the MachineSets' creation times, which order old sets.
type RolloutInput struct {
	// Replicas is the MachineDeployment's desired number of Machines.
	Replicas int32
	Strategy RolloutStrategy

	// MachineSets are the sets the MachineDeployment owns, in any order.
	MachineSets []MachineSetState
}

// RolloutPlan says how to move a MachineDeployment one step towards having
// only up-to-date Machines. Applying it and planning again before any
// Machine changes yields a plan with nothing to do.
type RolloutPlan struct {
	// MaxSurge and MaxUnavailable are the strategy's limits resolved against
	// the desired replicas; both are 0 for OnDelete.
	MaxSurge       int32
	MaxUnavailable int32

	// MachineSets has one entry per MachineSet given, oldest first.
	MachineSets []MachineSetTarget

	// Create, when set, asks for a new MachineSet with the MachineDeployment's
	// template, because none of the given sets has it.
	Create *NewMachineSet
}

// MachineSetTarget is the replicas one MachineSet should have.
type MachineSetTarget struct {
	Name string
	// From is the set's spec.replicas now; To is what to set it to.
	From, To int32
	// Reason says why To differs from From, for events and conditions. It is
	// empty when they are equal.
	Reason string
}

// NewMachineSet is a MachineSet the plan asks to create.
type NewMachineSet struct {
	Replicas int32
	Reason   string
}

// Changes returns the MachineSets whose replicas must change, in the order
// to apply them: every scale-down before any scale-up (and Create after
// both). Each change is safe on its own, so a reconciler that stops half way
// leaves nothing worse than before.
func (p RolloutPlan) Changes() []MachineSetTarget {
	var down, up []MachineSetTarget
	for _, t := range p.MachineSets {
		switch {
		case t.To < t.From:
			down = append(down, t)
		case t.To > t.From:
			up = append(up, t)
		}
	}
	return append(down, up...)
}

// Empty reports whether the plan changes nothing.
func (p RolloutPlan) Empty() bool {
	return p.Create == nil && len(p.Changes()) == 0
}

// PlanRollout decides the next replicas of a MachineDeployment's MachineSets.
//
// RollingUpdate behaves as Kubernetes Deployments and Cluster API
// MachineDeployments do: the up-to-date set grows while the Machines all sets
// may hold stay within replicas+maxSurge, and old sets, oldest first, shrink
// while the available Machines they keep stay at or above
// replicas-maxUnavailable. Old replicas that are not available go before
// available ones, so old Machines that never become ready cannot block a
// rollout, but only as far as enough Machines remain to reach that floor. So
// once both limits are met (as they are in a steady state) they stay met
// until replicas change, provided no Machine fails on its own.
//
// With either strategy old sets never create Machines: a replica without a
// Machine is dropped, and the up-to-date set replaces it. Unlike
// Deployments, a change of replicas during a rollout is not spread over all
// sets in proportion: more replicas go to the up-to-date set, and fewer are
// taken from old sets first. Both keep Machines of an old template, which
// would only be replaced again, to a minimum.
//
// OnDelete never removes an old Machine on its own: an old set is scaled
// down to stop replacing the Machines someone deleted, and the up-to-date set
// takes over those replicas. Only when replicas go down do old sets, oldest
// first, lose more.
//
// An error means the input cannot be planned (a negative count, an unknown
// strategy, limits that are not numbers or percentages, or maxSurge and
// maxUnavailable both coming to 0); its message says what to change.
func PlanRollout(in RolloutInput) (RolloutPlan, error) {
	if in.Replicas < 0 {
		return RolloutPlan{}, fmt.Errorf("replicas is %d: it must not be negative", in.Replicas)
	}
	sets, err := rolloutWorkingSets(in.MachineSets)
	if err != nil {
		return RolloutPlan{}, err
	}

	r := rollout{desired: int(in.Replicas), strategy: in.Strategy.Type}
	for _, s := range sets {
		if s.UpToDate && r.current == nil {
			r.current = s
		} else {
			r.old = append(r.old, s)
		}
	}
	creating := r.current == nil
	if creating {
		// Planned as an empty set, so that the replicas it is created with
		// obey the same limits as later scale-ups.
		r.current = &workingSet{}
	}

	var step func() bool
	switch in.Strategy.Type {
	case "", RollingUpdate:
		r.strategy = RollingUpdate
		r.surge, r.unavailable, err = resolveRollingUpdate(in.Strategy, r.desired)
		if err != nil {
			return RolloutPlan{}, err
		}
		step = r.rollingStep
	case OnDelete:
		step = r.onDeleteStep
	default:
		return RolloutPlan{}, fmt.Errorf("strategy type %q is unknown: use %s or %s", in.Strategy.Type, RollingUpdate, OnDelete)
	}

	// One step can open room for another (a shrinking old set frees surge for
	// the new one, a growing new set adds availability), so steps repeat
	// until nothing moves; that makes the plan a fixed point, and a
	// reconciler that re-plans after its own writes does nothing more. After
	// the first step the up-to-date set only grows and old sets only shrink,
	// so the loop ends.
	for step() {
	}

	p := RolloutPlan{MaxSurge: int32(r.surge), MaxUnavailable: int32(r.unavailable)}
	for _, s := range sets {
		t := MachineSetTarget{Name: s.Name, From: s.Replicas, To: int32(s.to)}
		if t.To != t.From {
			t.Reason = r.reason(s)
		}
		p.MachineSets = append(p.MachineSets, t)
	}
	if creating {
		p.Create = &NewMachineSet{Replicas: int32(r.current.to), Reason: r.createReason()}
	}
	return p, nil
}

// workingSet is a MachineSet under planning: its observed state and the
// replicas planned so far.
type workingSet struct {
	MachineSetState
	to int
}

// footprint is the most Machines the set can hold once told to have `to`
// replicas: Machines already there stay until deleted, missing ones get
// created.
func (s *workingSet) footprint() int { return max(s.to, int(s.Machines)) }

// keptAvailable is how many available Machines the set keeps once it has
// `to` replicas, given that it deletes unavailable Machines first.
func (s *workingSet) keptAvailable() int { return min(int(s.Available), s.to) }

// unavailableReplicas are replicas not backed by an available Machine.
func (s *workingSet) unavailableReplicas() int { return max(0, s.to-int(s.Available)) }

func rolloutWorkingSets(in []MachineSetState) ([]*workingSet, error) {
	seen := make(map[string]bool, len(in))
	sets := make([]*workingSet, 0, len(in))
	for _, s := range in {
		switch {
		case s.Name == "":
			return nil, errors.New("a MachineSet has no name")
		case seen[s.Name]:
			return nil, fmt.Errorf("MachineSet %q is listed twice", s.Name)
		case s.Replicas < 0 || s.Machines < 0 || s.Available < 0 || s.Deleting < 0:
			return nil, fmt.Errorf("MachineSet %q has a negative count (replicas %d, machines %d, available %d, deleting %d)",
				s.Name, s.Replicas, s.Machines, s.Available, s.Deleting)
		}
		seen[s.Name] = true
		// Counts gathered from a cache can disagree for a moment; trust the
		// smaller ones, which keeps every limit on the safe side.
		s.Deleting = min(s.Deleting, s.Machines)
		s.Available = min(s.Available, s.Machines-s.Deleting)
		sets = append(sets, &workingSet{MachineSetState: s, to: int(s.Replicas)})
	}
	slices.SortFunc(sets, func(a, b *workingSet) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return cmp.Compare(a.Name, b.Name)
	})
	return sets, nil
}

// resolveRollingUpdate turns maxSurge and maxUnavailable into Machine counts
// for the desired replicas.
func resolveRollingUpdate(s RolloutStrategy, desired int) (surge, unavailable int, err error) {
	surge, unavailable = 1, 0
	if s.MaxSurge != nil {
		if surge, err = scaledLimit("maxSurge", *s.MaxSurge, desired, true); err != nil {
			return 0, 0, err
		}
	}
	if s.MaxUnavailable != nil {
		if unavailable, err = scaledLimit("maxUnavailable", *s.MaxUnavailable, desired, false); err != nil {
			return 0, 0, err
		}
	}
	// Kubernetes Deployments quietly allow one unavailable Pod here; the
	// Cluster API refuses both limits at 0, and a percentage that rounds to 0
	// is the same trap, so it is reported rather than papered over. With no
	// replicas there is nothing to protect and nothing can get stuck.
	if desired > 0 && surge == 0 && unavailable == 0 {
		return 0, 0, fmt.Errorf("maxSurge (%s) and maxUnavailable (%s) both come to 0 Machines for %d replicas, so a rollout could neither add nor remove a Machine: raise one of them",
			limitString(s.MaxSurge, "1"), limitString(s.MaxUnavailable, "0"), desired)
	}
	return surge, unavailable, nil
}

func scaledLimit(field string, v intstr.IntOrString, desired int, roundUp bool) (int, error) {
	n, err := intstr.GetScaledValueFromIntOrPercent(&v, desired, roundUp)
	if err != nil {
		return 0, fmt.Errorf("%s %q is neither a number nor a percentage such as 25%%: %w", field, v.String(), err)
	}
	if n < 0 {
		return 0, fmt.Errorf("%s is %s: it must not be negative", field, v.String())
	}
	return n, nil
}

func limitString(v *intstr.IntOrString, def string) string {
	if v == nil {
		return def + ", the default"
	}
	return v.String()
}

// rollout is the state of one planning run.
type rollout struct {
	desired, surge, unavailable int
	strategy                    StrategyType

	current *workingSet   // the up-to-date set, possibly still to be created
	old     []*workingSet // oldest first
}

func (r *rollout) minAvailable() int { return max(0, r.desired-r.unavailable) }

// capCurrent keeps the up-to-date set within the desired replicas.
func (r *rollout) capCurrent() bool {
	if r.current.to > r.desired {
		r.current.to = r.desired
		return true
	}
	return false
}

// dropOldReplicasWithoutMachines stops old sets from creating Machines: a
// Machine that was deleted, or not yet created when its set became old, is
// better replaced by an up-to-date one, in the room this frees. (Cluster API
// gets the same effect by marking old MachineSets so that they create no
// Machines.) It costs no availability and deletes no Machine.
func (r *rollout) dropOldReplicasWithoutMachines() bool {
	moved := false
	for _, s := range r.old {
		if backed := int(s.Machines - s.Deleting); s.to > backed {
			s.to = backed
			moved = true
		}
	}
	return moved
}

// rollingStep moves every set as far as the limits allow right now and
// reports whether anything moved.
func (r *rollout) rollingStep() bool {
	moved := r.capCurrent()
	if r.dropOldReplicasWithoutMachines() {
		moved = true
	}

	// Old replicas may go as long as enough stay to reach the availability
	// floor. Unavailable ones cost no availability, but only so many of them
	// may go that the floor stays reachable: below it, the rest are left to
	// become available. Available ones may go only while the floor is met.
	keptAvailable := r.current.keptAvailable()
	unavailableOld := 0
	for _, s := range r.old {
		keptAvailable += s.keptAvailable()
		unavailableOld += s.unavailableReplicas()
	}
	removable := unavailableOld + keptAvailable - r.minAvailable()
	for _, s := range r.old {
		k := min(s.unavailableReplicas(), removable)
		if k > 0 {
			s.to -= k
			removable -= k
			moved = true
		}
	}
	for _, s := range r.old {
		k := min(s.to, removable)
		if k > 0 {
			s.to -= k
			removable -= k
			moved = true
		}
	}

	// The up-to-date set gets what the old sets' footprints leave of the
	// limit. That can be less than it has: after replicas went down, Machines
	// it was told to create would push the total over the new limit, so
	// those are taken back until old Machines go. Up-to-date Machines that
	// already exist are kept; deleting them would only make the rollout
	// longer.
	limit := r.desired + r.surge
	for _, s := range r.old {
		limit -= s.footprint()
	}
	if to := min(r.desired, max(limit, int(r.current.Machines))); to != r.current.to {
		r.current.to = to
		moved = true
	}
	return moved
}

// onDeleteStep moves every set as far as OnDelete allows right now and
// reports whether anything moved.
func (r *rollout) onDeleteStep() bool {
	moved := r.capCurrent()
	if r.dropOldReplicasWithoutMachines() {
		moved = true
	}
	total := r.current.to
	for _, s := range r.old {
		total += s.to
	}
	for _, s := range r.old {
		k := min(s.to, total-r.desired)
		if k > 0 {
			s.to -= k
			total -= k
			moved = true
		}
	}
	if total < r.desired {
		r.current.to += r.desired - total
		moved = true
	}
	return moved
}

func (r *rollout) reason(s *workingSet) string {
	from, to := int(s.Replicas), s.to
	if s == r.current {
		verb := "up"
		if to < from {
			verb = "down"
		}
		if to == r.desired {
			return fmt.Sprintf("scale %s from %d to %d replicas, the MachineDeployment's replicas", verb, from, to)
		}
		return fmt.Sprintf("scale %s from %d to %d of %d replicas%s", verb, from, to, r.desired, r.partialGrowth())
	}

	// Replicas without a Machine go first, then those whose Machine is not
	// available, then available ones; say how many of each went.
	backed := min(from, int(s.Machines-s.Deleting))
	available := int(s.Available)
	withoutMachine := from - backed
	unavailableGone := max(0, backed-available) - max(0, to-available)
	availableGone := min(available, backed) - min(available, to)

	msg := fmt.Sprintf("scale down old MachineSet from %d to %d replicas: ", from, to)
	if r.strategy == OnDelete {
		var parts []string
		if withoutMachine > 0 {
			parts = append(parts, fmt.Sprintf("%s deleted or never created %s not replaced (OnDelete)", count(withoutMachine, "Machine"), isAre(withoutMachine)))
		}
		if extra := backed - to; extra > 0 {
			parts = append(parts, fmt.Sprintf("%d more %s to match the MachineDeployment's %d replicas", extra, goes(extra), r.desired))
		}
		return msg + strings.Join(parts, "; ")
	}

	var parts []string
	if withoutMachine > 0 {
		parts = append(parts, count(withoutMachine, "replica")+" without a Machine")
	}
	if unavailableGone > 0 {
		parts = append(parts, count(unavailableGone, "replica")+" not available")
	}
	if availableGone > 0 {
		parts = append(parts, count(availableGone, "available Machine"))
	}
	msg += "removes " + joinList(parts)
	if m := r.minAvailable(); availableGone > 0 && m > 0 {
		msg += fmt.Sprintf(", keeping at least %d available (%d replicas, maxUnavailable %d)", m, r.desired, r.unavailable)
	}
	return msg
}

func (r *rollout) createReason() string {
	to := r.current.to
	msg := fmt.Sprintf("create a MachineSet for the new template with %d of %d replicas", to, r.desired)
	if to < r.desired {
		msg += r.partialGrowth()
	}
	return msg
}

// partialGrowth says what holds the up-to-date set below the desired replicas.
func (r *rollout) partialGrowth() string {
	if r.strategy == OnDelete {
		return ", the rest as old Machines are deleted (OnDelete)"
	}
	return fmt.Sprintf(", keeping at most %d Machines in all (%d replicas, maxSurge %d)", r.desired+r.surge, r.desired, r.surge)
}

func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func isAre(n int) string {
	if n == 1 {
		return "is"
	}
	return "are"
}

func goes(n int) string {
	if n == 1 {
		return "goes"
	}
	return "go"
}
