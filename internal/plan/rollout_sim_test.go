package plan_test

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/plan"
)

// The simulator plays a MachineDeployment controller that applies
// PlanRollout, MachineSet controllers that create Machines and delete them
// with MachinesToDelete, Machines that take random times to become
// available and to go away, a user who changes the template and the
// replicas, and (for OnDelete) a user who deletes old Machines. Every actor
// runs in random order, or not at all, in each tick.

type simMachine struct {
	name      string
	created   int
	readyIn   int // ticks left until available; negative: never
	available bool
	deleting  bool
	goneIn    int // ticks left until a deleting Machine is gone
}

type simSet struct {
	name     string
	template int
	created  int
	replicas int32
	machines []*simMachine
}

type simulator struct {
	t        *testing.T
	seed     uint64
	rng      *rand.Rand
	now      int
	replicas int32
	template int
	broken   map[int]bool // templates whose Machines never become available
	strategy plan.RolloutStrategy
	order    clusterv1.MachineSetDeletionOrder
	maxDelay int
	sets     []*simSet
	nextName int

	// Invariant bookkeeping, reset whenever replicas (and so the limits)
	// change. The limits hold from the moment the MachineSets' specs meet
	// them: within maxSurge once the Machines the sets may hold (each
	// max(spec, Machines)) fit, above maxUnavailable once the available
	// Machines the sets keep (each min(available, spec)) reach the floor. A
	// rollout that starts from a steady state meets both at once; before
	// that, Machines a spec already asked for may come or go whatever the
	// planner does.
	withinSurge, aboveFloor bool
	checkedSurge, checked   int
	surge, unavailable      int32
	replicasWentDown        bool
	oldDeletedBySet         int
	deletions               int
	checkedOnDelete         int
}

func newSimulator(t *testing.T, seed uint64, strategy plan.RolloutStrategy) *simulator {
	rng := rand.New(rand.NewPCG(seed, 2))
	s := &simulator{
		t: t, seed: seed, rng: rng, strategy: strategy,
		replicas: int32(rng.IntN(8)), template: 1, broken: map[int]bool{},
		order:    []clusterv1.MachineSetDeletionOrder{"", clusterv1.RandomMachineSetDeletionOrder, clusterv1.NewestMachineSetDeletionOrder, clusterv1.OldestMachineSetDeletionOrder}[rng.IntN(4)],
		maxDelay: 1 + rng.IntN(6),
	}
	s.limitsChanged()
	return s
}

func (s *simulator) fatalf(format string, args ...any) {
	s.t.Helper()
	s.t.Fatalf("seed %d, tick %d (replicas %d, template %d, %s): %s\n%s", s.seed, s.now, s.replicas, s.template,
		s.strategyString(), fmt.Sprintf(format, args...), s.dump())
}

func (s *simulator) strategyString() string {
	if s.strategy.Type == plan.OnDelete {
		return "OnDelete"
	}
	return fmt.Sprintf("maxSurge %s, maxUnavailable %s", s.strategy.MaxSurge.String(), s.strategy.MaxUnavailable.String())
}

func (s *simulator) dump() string {
	out := ""
	for _, ms := range s.sets {
		var avail, deleting int
		for _, m := range ms.machines {
			if m.deleting {
				deleting++
			} else if m.available {
				avail++
			}
		}
		out += fmt.Sprintf("  %s template %d replicas %d machines %d available %d deleting %d\n",
			ms.name, ms.template, ms.replicas, len(ms.machines), avail, deleting)
	}
	return out
}

func (s *simulator) state() plan.RolloutInput {
	in := plan.RolloutInput{Replicas: s.replicas, Strategy: s.strategy}
	for _, ms := range s.sets {
		st := plan.MachineSetState{
			Name: ms.name, Created: epoch.Add(time.Duration(ms.created) * time.Second),
			UpToDate: ms.template == s.template, Replicas: ms.replicas, Machines: int32(len(ms.machines)),
		}
		for _, m := range ms.machines {
			if m.deleting {
				st.Deleting++
			} else if m.available {
				st.Available++
			}
		}
		in.MachineSets = append(in.MachineSets, st)
	}
	return in
}

func (s *simulator) counts() (total, available, notDeleting, mayHold, keeps int32) {
	for _, ms := range s.sets {
		var setAvailable int32
		for _, m := range ms.machines {
			total++
			if !m.deleting {
				notDeleting++
				if m.available {
					setAvailable++
				}
			}
		}
		available += setAvailable
		mayHold += max(ms.replicas, int32(len(ms.machines)))
		keeps += min(setAvailable, ms.replicas)
	}
	return total, available, notDeleting, mayHold, keeps
}

// limitsChanged resolves the limits for the current replicas and restarts
// the invariants, which hold from the moment the Machines first meet them.
func (s *simulator) limitsChanged() {
	s.surge, s.unavailable = 0, 0
	if s.strategy.Type != plan.OnDelete {
		p, err := plan.PlanRollout(plan.RolloutInput{Replicas: s.replicas, Strategy: s.strategy})
		if err != nil {
			s.fatalf("%v", err)
		}
		s.surge, s.unavailable = p.MaxSurge, p.MaxUnavailable
	}
	s.withinSurge, s.aboveFloor = false, false
	s.checkInvariants()
}

func (s *simulator) checkInvariants() {
	s.t.Helper()
	total, available, notDeleting, mayHold, keeps := s.counts()
	if s.strategy.Type == plan.OnDelete {
		if !s.replicasWentDown {
			s.checkedOnDelete++
			if s.oldDeletedBySet > 0 {
				s.fatalf("an old MachineSet deleted %d Machines on its own", s.oldDeletedBySet)
			}
			if notDeleting > s.replicas {
				s.fatalf("%d Machines not being deleted, above replicas %d", notDeleting, s.replicas)
			}
		}
		return
	}
	limit := s.replicas + s.surge
	s.withinSurge = s.withinSurge || mayHold <= limit
	if s.withinSurge {
		s.checkedSurge++
		if total > limit || mayHold > limit {
			s.fatalf("%d Machines exist and the sets may hold %d, above %d (replicas + maxSurge)", total, mayHold, limit)
		}
	}
	floor := s.replicas - s.unavailable
	s.aboveFloor = s.aboveFloor || keeps >= floor
	if s.aboveFloor {
		s.checked++
		if available < floor || keeps < floor {
			s.fatalf("%d Machines are available and the sets keep %d, below %d (replicas - maxUnavailable)", available, keeps, floor)
		}
	}
}

// reconcileDeployment plans and applies, and checks that the plan does not
// depend on input order and that planning again right away changes nothing.
func (s *simulator) reconcileDeployment() {
	in := s.state()
	p, err := plan.PlanRollout(in)
	if err != nil {
		s.fatalf("%v", err)
	}
	shuffled := in
	shuffled.MachineSets = slices.Clone(in.MachineSets)
	s.rng.Shuffle(len(shuffled.MachineSets), func(i, j int) {
		shuffled.MachineSets[i], shuffled.MachineSets[j] = shuffled.MachineSets[j], shuffled.MachineSets[i]
	})
	if p2, err := plan.PlanRollout(shuffled); err != nil || !reflect.DeepEqual(p, p2) {
		s.fatalf("the plan depends on input order:\n%+v\n%+v", p, p2)
	}
	if p2, _ := plan.PlanRollout(in); !reflect.DeepEqual(p, p2) {
		s.fatalf("the same state gives two plans:\n%+v\n%+v", p, p2)
	}

	for _, c := range p.Changes() {
		for _, ms := range s.sets {
			if ms.name == c.Name {
				if ms.replicas != c.From {
					s.fatalf("plan says %s has %d replicas, it has %d", c.Name, c.From, ms.replicas)
				}
				ms.replicas = c.To
			}
		}
	}
	if p.Create != nil {
		s.nextName++
		s.sets = append(s.sets, &simSet{name: fmt.Sprintf("ms-%03d", s.nextName), template: s.template, created: s.now, replicas: p.Create.Replicas})
	}
	if again, err := plan.PlanRollout(s.state()); err != nil || !again.Empty() {
		s.fatalf("planning again right after applying %+v gives %+v (%v)", p, again, err)
	}
}

// reconcileSet does what a MachineSet controller does: create missing
// Machines, or delete surplus ones (counting those already being deleted).
func (s *simulator) reconcileSet(ms *simSet) {
	var deleting int32
	for _, m := range ms.machines {
		if m.deleting {
			deleting++
		}
	}
	n := int32(len(ms.machines))
	switch {
	case n < ms.replicas:
		for range ms.replicas - n {
			s.nextName++
			readyIn := 1 + s.rng.IntN(s.maxDelay)
			if s.broken[ms.template] {
				readyIn = -1
			}
			ms.machines = append(ms.machines, &simMachine{name: fmt.Sprintf("m-%04d", s.nextName), created: s.now, readyIn: readyIn})
		}
	case n-deleting > ms.replicas:
		var candidates []plan.Machine
		for _, m := range ms.machines {
			candidates = append(candidates, plan.Machine{
				Name: m.name, Created: epoch.Add(time.Duration(m.created) * time.Second),
				NotReady: !m.available, Deleting: m.deleting,
			})
		}
		names := plan.MachinesToDelete(candidates, int(n-ms.replicas), s.order)
		if int32(len(names)) != n-deleting-ms.replicas {
			s.fatalf("MachinesToDelete chose %d of %s, want %d", len(names), ms.name, n-deleting-ms.replicas)
		}
		for _, m := range ms.machines {
			if slices.Contains(names, m.name) {
				s.markDeleting(m)
				if ms.template != s.template {
					s.oldDeletedBySet++
				}
			}
		}
	}
}

func (s *simulator) markDeleting(m *simMachine) {
	m.deleting, m.available = true, false
	m.goneIn = 1 + s.rng.IntN(s.maxDelay)
	s.deletions++
}

// advance lets time pass for a random half of the Machines.
func (s *simulator) advance() {
	for _, ms := range s.sets {
		kept := ms.machines[:0]
		for _, m := range ms.machines {
			if s.rng.IntN(2) == 0 {
				switch {
				case m.deleting:
					m.goneIn--
				case m.readyIn > 0:
					m.readyIn--
					m.available = m.readyIn == 0
				}
			}
			if !m.deleting || m.goneIn > 0 {
				kept = append(kept, m)
			}
		}
		ms.machines = kept
	}
}

// userDeletesOldMachine is what a user of OnDelete does.
func (s *simulator) userDeletesOldMachine() {
	var old []*simMachine
	for _, ms := range s.sets {
		if ms.template == s.template {
			continue
		}
		for _, m := range ms.machines {
			if !m.deleting {
				old = append(old, m)
			}
		}
	}
	if len(old) > 0 {
		s.markDeleting(old[s.rng.IntN(len(old))])
	}
}

// userChanges changes the template (sometimes to a broken one, sometimes
// back to an earlier one) or the replicas.
func (s *simulator) userChanges(finalChange bool) {
	switch r := s.rng.IntN(10); {
	case r < 5 || finalChange:
		s.template = s.templateAfter() + 1
		if !finalChange && s.rng.IntN(4) == 0 {
			s.broken[s.template] = true
		}
	case r < 6:
		s.template = 1 + s.rng.IntN(s.template)
	default:
		old := s.replicas
		s.replicas = int32(s.rng.IntN(9))
		if s.replicas < old {
			s.replicasWentDown = true
		}
		s.limitsChanged()
	}
}

func (s *simulator) templateAfter() int {
	latest := s.template
	for _, ms := range s.sets {
		latest = max(latest, ms.template)
	}
	return latest
}

func (s *simulator) converged() bool {
	current := 0
	for _, ms := range s.sets {
		if ms.template != s.template {
			if ms.replicas != 0 || len(ms.machines) != 0 {
				return false
			}
			continue
		}
		current++
		if ms.replicas != s.replicas || int32(len(ms.machines)) != s.replicas {
			return false
		}
		for _, m := range ms.machines {
			if m.deleting || !m.available {
				return false
			}
		}
	}
	return current == 1
}

func (s *simulator) tick(userChanges bool) {
	s.now++
	type op func()
	ops := []op{s.reconcileDeployment, s.advance}
	for _, ms := range s.sets {
		ops = append(ops, func() { s.reconcileSet(ms) })
	}
	if s.strategy.Type == plan.OnDelete && s.rng.IntN(3) == 0 {
		ops = append(ops, s.userDeletesOldMachine)
	}
	if userChanges && s.rng.IntN(12) == 0 {
		ops = append(ops, func() { s.userChanges(false) })
	}
	s.rng.Shuffle(len(ops), func(i, j int) { ops[i], ops[j] = ops[j], ops[i] })
	for _, o := range ops {
		if s.rng.IntN(5) == 0 {
			continue // this actor does not run in this tick
		}
		o()
		s.checkInvariants()
	}
}

// run lets the user make changes for a while, then makes sure the last
// template works, and requires the rollout to finish within a bound that
// depends only on the size of the problem.
func (s *simulator) run() {
	busy := s.rng.IntN(150)
	for range busy {
		s.tick(true)
	}
	if s.broken[s.template] || s.rng.IntN(2) == 0 {
		s.userChanges(true)
	}
	machines, _, _, _, _ := s.counts()
	bound := 60 * (int(machines) + int(s.replicas) + 2) * s.maxDelay
	for range bound {
		if s.converged() {
			return
		}
		s.tick(false)
	}
	s.fatalf("did not converge within %d ticks after the last change", bound)
}

func TestRollingUpdateSimulation(t *testing.T) {
	var deletions, checkedSurge, checked int
	for seed := range uint64(400) {
		s := newSimulator(t, seed, randomStrategy(rand.New(rand.NewPCG(seed, 3))))
		s.run()
		deletions += s.deletions
		checkedSurge += s.checkedSurge
		checked += s.checked
	}
	if deletions == 0 || checkedSurge == 0 || checked == 0 {
		t.Fatalf("the simulations deleted %d Machines and checked the limits %d and %d times: they test nothing",
			deletions, checkedSurge, checked)
	}
	t.Logf("%d Machines deleted; maxSurge checked %d times, maxUnavailable %d times", deletions, checkedSurge, checked)
}

// steady gives the simulator one MachineSet of the current template whose
// Machines are all available, as a MachineDeployment has between rollouts.
func (s *simulator) steady() {
	ms := &simSet{name: "ms-000", template: s.template, replicas: s.replicas}
	for i := range s.replicas {
		ms.machines = append(ms.machines, &simMachine{name: fmt.Sprintf("m-steady-%d", i), available: true})
	}
	s.sets = []*simSet{ms}
	s.limitsChanged()
}

// TestRollingUpdateFromSteadyState starts every rollout from a steady state,
// which meets both limits, so they must hold from the first tick on (until
// the replicas change).
func TestRollingUpdateFromSteadyState(t *testing.T) {
	for seed := range uint64(300) {
		s := newSimulator(t, seed, randomStrategy(rand.New(rand.NewPCG(seed, 4))))
		s.steady()
		if !s.withinSurge || !s.aboveFloor {
			s.fatalf("a steady state does not meet the limits")
		}
		s.userChanges(true)
		s.run()
	}
}

// TestOnDeleteSimulation checks that old MachineSets never delete a Machine
// on their own and that no more than replicas Machines run (both until
// replicas go down), and that the rollout finishes once the user has deleted
// every old Machine.
func TestOnDeleteSimulation(t *testing.T) {
	var deletions, checked int
	for seed := range uint64(300) {
		s := newSimulator(t, seed, onDelete)
		s.run()
		deletions += s.deletions
		checked += s.checkedOnDelete
	}
	if deletions == 0 || checked == 0 {
		t.Fatalf("the simulations deleted %d Machines and checked OnDelete %d times: they test nothing", deletions, checked)
	}
}
