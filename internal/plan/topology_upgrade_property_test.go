package plan_test

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/util/version"

	"capstan.dev/capstan/internal/plan"
)

// The properties below are checked over seeded random topologies, so a
// failure names the seed that reproduces it.

func kv(s string) *version.Version { return version.MustParseSemantic(s) }

func ver(minor, patch int) string { return fmt.Sprintf("v1.%d.%d", minor, patch) }

// classVersions lists one to three patches of every minor from lo to hi,
// lowest first, as a ClusterClass's spec.kubernetesVersions does.
func classVersions(rng *rand.Rand, lo, hi int) []string {
	var list []string
	for m := lo; m <= hi; m++ {
		n := 1 + rng.IntN(3)
		for p := range n {
			list = append(list, ver(m, p*2))
		}
	}
	return list
}

// randomTopology is a topology in an arbitrary state, not only one an
// upgrade passes through: parts rolling or not, workers behind the control
// plane by up to three minors, some new, some held or deferred; sometimes a
// target the class cannot reach.
func randomTopology(rng *rand.Rand) plan.TopologyUpgradeInput {
	cpMinor := 28 + rng.IntN(4)
	in := plan.TopologyUpgradeInput{Concurrency: rng.IntN(4)}
	targetMinor := cpMinor + rng.IntN(5)
	if rng.IntN(2) == 0 {
		in.KubernetesVersions = classVersions(rng, 25, 36)
		var candidates []string
		for _, v := range in.KubernetesVersions {
			if kv(v).Minor() == uint(targetMinor) {
				candidates = append(candidates, v)
			}
		}
		in.Version = candidates[rng.IntN(len(candidates))]
	} else {
		if rng.IntN(4) > 0 {
			targetMinor = cpMinor + rng.IntN(2)
		}
		in.Version = ver(targetMinor, rng.IntN(3))
	}
	cpVersion := ver(cpMinor, rng.IntN(3))
	if kv(in.Version).LessThan(kv(cpVersion)) {
		cpVersion = in.Version
	}
	if rng.IntN(10) > 0 {
		in.ControlPlane = plan.ControlPlaneVersionState{
			Exists:       true,
			Version:      cpVersion,
			Upgrading:    rng.IntN(4) == 0,
			Provisioning: rng.IntN(10) == 0,
			Kind:         "KubeadmControlPlane",
		}
	}
	workers := func(prefix string, n int) []plan.WorkerVersionState {
		var ws []plan.WorkerVersionState
		for i := range n {
			w := plan.WorkerVersionState{Name: fmt.Sprintf("%s-%d", prefix, i)}
			if rng.IntN(5) > 0 {
				w.Exists = true
				w.Version = ver(cpMinor-rng.IntN(4), rng.IntN(3))
				if kv(cpVersion).LessThan(kv(w.Version)) {
					w.Version = cpVersion
				}
				w.Upgrading = rng.IntN(4) == 0
			}
			w.Hold = rng.IntN(10) == 0
			w.Defer = rng.IntN(10) == 0
			ws = append(ws, w)
		}
		return ws
	}
	in.MachineDeployments = workers("md", rng.IntN(5))
	in.MachinePools = workers("mp", rng.IntN(3))
	return in
}

// TestPlanTopologyUpgradeProperties checks every decision over arbitrary
// topologies: the control plane moves at most one minor, up, and only when
// nothing holds it; a worker never gets a version newer than the control
// plane's, never goes down, and moves only while the control plane stands
// still; no more workers start than the concurrency leaves room for beside
// those rolling (one rolling may take its next step); a held
// worker and every one after it, and a deferred one, keep their versions;
// new workers are created at the topology's version only once the control
// plane is stable there (or with it); every worker is decided exactly once;
// a refusal changes nothing; the same input gives the same decision.
func TestPlanTopologyUpgradeProperties(t *testing.T) {
	refusals := 0
	for seed := range uint64(5000) {
		rng := rand.New(rand.NewPCG(seed, 17))
		in := randomTopology(rng)
		got := plan.PlanTopologyUpgrade(in)
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("seed %d: %s\ninput: %+v\ndecision: %+v", seed, fmt.Sprintf(format, args...), in, got)
		}

		again := plan.PlanTopologyUpgrade(in)
		if fmt.Sprint(got.Err) != fmt.Sprint(again.Err) {
			fail("a second decision errs differently: %v", again.Err)
		}
		got.Err, again.Err = nil, nil
		if !reflect.DeepEqual(got, again) {
			fail("a second decision differs: %+v", again)
		}
		got = plan.PlanTopologyUpgrade(in)

		if got.Err != nil {
			refusals++
			checkRefusal(in, got, fail)
			continue
		}

		cp := in.ControlPlane
		cpMoved := cp.Exists && got.ControlPlaneVersion != cp.Version
		switch {
		case !cp.Exists && got.ControlPlaneVersion != in.Version:
			fail("a new control plane is created at %s, not at the topology's version", got.ControlPlaneVersion)
		case cpMoved:
			from, to := kv(cp.Version), kv(got.ControlPlaneVersion)
			if !from.LessThan(to) || to.Minor() > from.Minor()+1 {
				fail("the control plane moves from %s to %s", cp.Version, got.ControlPlaneVersion)
			}
			if cp.Upgrading || cp.Provisioning {
				fail("the control plane moves while it is still rolling or provisioning")
			}
			if anyWorkerUpgrading(in.MachineDeployments) || anyWorkerUpgrading(in.MachinePools) {
				fail("the control plane moves while workers upgrade")
			}
			if kv(in.Version).LessThan(to) {
				fail("the control plane goes past the topology's version")
			}
		}
		cpStableAtTarget := cp.Exists && !cp.Upgrading && !cp.Provisioning && kv(cp.Version).EqualTo(kv(in.Version))

		for _, kind := range []struct {
			name    string
			workers []plan.WorkerVersionState
			decided map[string]string
			pending []string
		}{
			{"MachineDeployment", in.MachineDeployments, got.MachineDeployments, got.MachineDeploymentsCreatePending},
			{"MachinePool", in.MachinePools, got.MachinePools, got.MachinePoolsCreatePending},
		} {
			pending := map[string]bool{}
			for _, n := range kind.pending {
				if pending[n] {
					fail("%s %s pending creation twice", kind.name, n)
				}
				pending[n] = true
			}
			if len(kind.decided)+len(kind.pending) != len(kind.workers) {
				fail("%d %ss decided, %d pending, of %d", len(kind.decided), kind.name, len(kind.pending), len(kind.workers))
			}
			rolling, started := 0, 0
			holdSeen := false
			for _, w := range kind.workers {
				holdSeen = holdSeen || w.Hold
				v, ok := kind.decided[w.Name]
				if !w.Exists {
					switch {
					case ok && v != in.Version:
						fail("new %s %s created at %s", kind.name, w.Name, v)
					case ok && cp.Exists && !cpStableAtTarget:
						fail("new %s %s created while the control plane is not stable at the version", kind.name, w.Name)
					case !ok && !pending[w.Name]:
						fail("new %s %s neither created nor pending", kind.name, w.Name)
					case !ok && (!cp.Exists || cpStableAtTarget):
						fail("new %s %s held back with the control plane stable", kind.name, w.Name)
					}
					continue
				}
				if w.Upgrading {
					rolling++
				}
				if !ok {
					fail("%s %s has no decision", kind.name, w.Name)
				}
				if v == w.Version {
					continue
				}
				if !w.Upgrading {
					// One already rolling that takes the next step is no
					// more workers upgrading at once.
					started++
				}
				switch {
				case holdSeen:
					fail("%s %s moves despite a hold-upgrade-sequence at or before it", kind.name, w.Name)
				case w.Defer:
					fail("%s %s moves despite defer-upgrade", kind.name, w.Name)
				case cpMoved || !cp.Exists:
					fail("%s %s moves while the control plane does", kind.name, w.Name)
				case cp.Upgrading || cp.Provisioning:
					fail("%s %s moves while the control plane rolls", kind.name, w.Name)
				case kv(cp.Version).LessThan(kv(v)):
					fail("%s %s gets %s, newer than the control plane's %s", kind.name, w.Name, v, cp.Version)
				case !kv(w.Version).LessThan(kv(v)):
					fail("%s %s goes from %s to %s", kind.name, w.Name, w.Version, v)
				}
			}
			if started > max(0, max(in.Concurrency, 1)-rolling) {
				fail("%d %ss start with %d rolling and concurrency %d", started, kind.name, rolling, in.Concurrency)
			}
		}
		if (got.Reason == "") != (got.Message == "") {
			fail("reason %q with message %q", got.Reason, got.Message)
		}
		checkPlansLeft(in, got, fail)
	}
	if refusals == 0 || refusals > 2500 {
		t.Errorf("%d refusals in 5000 topologies: the generator does not cover both kinds of decision", refusals)
	}
}

// checkPlansLeft checks the plans the status shows: what is left once the
// decision is written, ending at the target, each step above the one before
// and above where the parts are; empty exactly when the parts are there.
func checkPlansLeft(in plan.TopologyUpgradeInput, got plan.TopologyUpgrade, fail func(string, ...any)) {
	target := kv(in.Version)
	ascending := func(what string, steps []string, from *version.Version) {
		for _, s := range steps {
			if !from.LessThan(kv(s)) {
				fail("%s plan %q does not go up from %s", what, steps, from)
			}
			from = kv(s)
		}
		if len(steps) > 0 && !kv(steps[len(steps)-1]).EqualTo(target) {
			fail("%s plan %q does not end at the target", what, steps)
		}
	}
	if in.ControlPlane.Exists {
		cpAt := kv(got.ControlPlaneVersion)
		if (len(got.ControlPlaneUpgradePlan) == 0) != cpAt.EqualTo(target) {
			fail("control plane at %s with the plan %q left", got.ControlPlaneVersion, got.ControlPlaneUpgradePlan)
		}
		ascending("control plane", got.ControlPlaneUpgradePlan, cpAt)
	} else if len(got.ControlPlaneUpgradePlan) > 0 || len(got.WorkersUpgradePlan) > 0 {
		fail("plans left for a topology being created")
	}
	var lowest *version.Version
	for _, decided := range []map[string]string{got.MachineDeployments, got.MachinePools} {
		for _, v := range decided {
			if v != "" && (lowest == nil || kv(v).LessThan(lowest)) {
				lowest = kv(v)
			}
		}
	}
	if in.ControlPlane.Exists && ((len(got.WorkersUpgradePlan) == 0) != (lowest == nil || lowest.EqualTo(target))) {
		fail("workers from %v with the plan %q left", lowest, got.WorkersUpgradePlan)
	}
	if lowest != nil {
		ascending("workers", got.WorkersUpgradePlan, lowest)
	}
}

func checkRefusal(in plan.TopologyUpgradeInput, got plan.TopologyUpgrade, fail func(string, ...any)) {
	if in.ControlPlane.Exists && got.ControlPlaneVersion != in.ControlPlane.Version {
		fail("a refusal moves the control plane")
	}
	for _, kind := range []struct {
		workers []plan.WorkerVersionState
		decided map[string]string
	}{{in.MachineDeployments, got.MachineDeployments}, {in.MachinePools, got.MachinePools}} {
		for _, w := range kind.workers {
			v, ok := kind.decided[w.Name]
			if w.Exists && v != w.Version || !w.Exists && ok {
				fail("a refusal changes worker %s", w.Name)
			}
		}
	}
	if got.Reason == "" || got.Message != got.Err.Error() {
		fail("a refusal without its reason and message")
	}
}

func anyWorkerUpgrading(ws []plan.WorkerVersionState) bool {
	for _, w := range ws {
		if w.Exists && w.Upgrading {
			return true
		}
	}
	return false
}

// TestPlanTopologyUpgradeConverged checks that once everything is at the
// topology's version and stable, the decision changes nothing and has nothing
// to say, however the workers are annotated.
func TestPlanTopologyUpgradeConverged(t *testing.T) {
	for seed := range uint64(1000) {
		rng := rand.New(rand.NewPCG(seed, 18))
		in := randomTopology(rng)
		in.ControlPlane = plan.ControlPlaneVersionState{Exists: true, Version: in.Version, Kind: "KubeadmControlPlane"}
		for _, ws := range [][]plan.WorkerVersionState{in.MachineDeployments, in.MachinePools} {
			for i := range ws {
				ws[i].Exists, ws[i].Version, ws[i].Upgrading = true, in.Version, false
			}
		}
		got := plan.PlanTopologyUpgrade(in)
		if got.Err != nil || got.Reason != "" || got.Message != "" || got.UpgradeStep != "" ||
			len(got.ControlPlaneUpgradePlan) > 0 || len(got.WorkersUpgradePlan) > 0 ||
			len(got.MachineDeploymentsCreatePending) > 0 || len(got.MachinePoolsCreatePending) > 0 {
			t.Fatalf("seed %d: a converged topology gives %+v", seed, got)
		}
		if got.ControlPlaneVersion != in.Version {
			t.Fatalf("seed %d: control plane %s", seed, got.ControlPlaneVersion)
		}
		for _, kind := range []struct {
			workers []plan.WorkerVersionState
			decided map[string]string
		}{{in.MachineDeployments, got.MachineDeployments}, {in.MachinePools, got.MachinePools}} {
			for _, w := range kind.workers {
				if kind.decided[w.Name] != in.Version {
					t.Fatalf("seed %d: worker %s gets %q", seed, w.Name, kind.decided[w.Name])
				}
			}
		}
	}
}

// simPart is a control plane or worker in the simulation: its version and
// how many more rounds its Machines take to reach it.
type simPart struct {
	version string
	rolling int
}

// TestPlanTopologyUpgradeSimulation runs whole upgrades: each round the
// decision is applied, a part given a new version rolls for a few rounds,
// and now and then a worker is added. Throughout, no worker is newer than
// the control plane or more than three minors behind it, and the control
// plane visits every minor on the way; in the end everything is at the
// target and the condition clears.
func TestPlanTopologyUpgradeSimulation(t *testing.T) {
	for seed := range uint64(400) {
		rng := rand.New(rand.NewPCG(seed, 19))
		start := 28 + rng.IntN(3)
		var list []string
		target := ver(start+rng.IntN(2), 2)
		if rng.IntN(3) > 0 {
			list = classVersions(rng, 27, 36)
			high := start + rng.IntN(6)
			for _, v := range list {
				if int(kv(v).Minor()) == high {
					target = v
				}
			}
		}
		startVersion := ver(start, 0)
		if kv(target).LessThan(kv(startVersion)) {
			startVersion = target
		}
		cp := simPart{version: startVersion}
		mds := map[string]*simPart{}
		var mdOrder []string
		for i := range 1 + rng.IntN(4) {
			name := fmt.Sprintf("md-%d", i)
			mds[name], mdOrder = &simPart{version: startVersion}, append(mdOrder, name)
		}
		mps := map[string]*simPart{}
		var mpOrder []string
		for i := range rng.IntN(3) {
			name := fmt.Sprintf("mp-%d", i)
			mps[name], mpOrder = &simPart{version: startVersion}, append(mpOrder, name)
		}
		concurrency := 1 + rng.IntN(3)
		visited := map[uint]bool{kv(startVersion).Minor(): true}

		done := false
		for round := 0; round < 300 && !done; round++ {
			if round == 3 && rng.IntN(2) == 0 {
				mdOrder = append(mdOrder, "md-late")
			}
			in := plan.TopologyUpgradeInput{
				Version: target, KubernetesVersions: list, Concurrency: concurrency,
				ControlPlane: plan.ControlPlaneVersionState{Exists: true, Version: cp.version, Upgrading: cp.rolling > 0},
			}
			toInput := func(order []string, parts map[string]*simPart) []plan.WorkerVersionState {
				var ws []plan.WorkerVersionState
				for _, n := range order {
					w := plan.WorkerVersionState{Name: n}
					if p, ok := parts[n]; ok {
						w.Exists, w.Version, w.Upgrading = true, p.version, p.rolling > 0
					}
					ws = append(ws, w)
				}
				return ws
			}
			in.MachineDeployments = toInput(mdOrder, mds)
			in.MachinePools = toInput(mpOrder, mps)
			got := plan.PlanTopologyUpgrade(in)
			if got.Err != nil {
				t.Fatalf("seed %d round %d: %v", seed, round, got.Err)
			}
			allDone := got.Reason == "" && cp.rolling == 0 && kv(cp.version).EqualTo(kv(target))

			tick := func(p *simPart) {
				if p.rolling > 0 {
					p.rolling--
				}
			}
			tick(&cp)
			for _, p := range mds {
				tick(p)
			}
			for _, p := range mps {
				tick(p)
			}
			if got.ControlPlaneVersion != cp.version {
				cp = simPart{version: got.ControlPlaneVersion, rolling: 1 + rng.IntN(3)}
				visited[kv(cp.version).Minor()] = true
			}
			apply := func(decided map[string]string, parts map[string]*simPart) {
				for n, v := range decided {
					p, ok := parts[n]
					switch {
					case !ok:
						parts[n] = &simPart{version: v, rolling: 1 + rng.IntN(3)}
					case p.version != v:
						p.version, p.rolling = v, 1+rng.IntN(3)
					}
				}
			}
			apply(got.MachineDeployments, mds)
			apply(got.MachinePools, mps)

			cpMinor := kv(cp.version).Minor()
			for n, p := range mergeParts(mds, mps) {
				m := kv(p.version).Minor()
				if kv(cp.version).LessThan(kv(p.version)) || m+3 < cpMinor {
					t.Fatalf("seed %d round %d: worker %s at %s with the control plane at %s", seed, round, n, p.version, cp.version)
				}
			}
			if allDone {
				for n, p := range mergeParts(mds, mps) {
					if !kv(p.version).EqualTo(kv(target)) {
						t.Fatalf("seed %d: the condition cleared with worker %s at %s", seed, n, p.version)
					}
				}
				done = true
			}
		}
		if !done {
			t.Fatalf("seed %d: the upgrade from %s to %s did not finish (control plane at %s)", seed, startVersion, target, cp.version)
		}
		for m := kv(startVersion).Minor(); m <= kv(target).Minor(); m++ {
			if !visited[m] {
				t.Fatalf("seed %d: the control plane skipped minor %d on its way from %s to %s", seed, m, startVersion, target)
			}
		}
	}
}

func mergeParts(a, b map[string]*simPart) map[string]*simPart {
	out := map[string]*simPart{}
	for n, p := range a {
		out[n] = p
	}
	for n, p := range b {
		out[n] = p
	}
	return out
}
