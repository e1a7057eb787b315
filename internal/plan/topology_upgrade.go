package plan

import (
	"fmt"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

// TopologyUpgradeInput is what the topology's upgrade decision reads: the
// version the topology asks for and where each part of the cluster is.
type TopologyUpgradeInput struct {
	// Version is spec.topology.version.
	Version string
	// KubernetesVersions is the class's spec.kubernetesVersions: when it is
	// set, an upgrade across minors goes through each minor it lists.
	KubernetesVersions []string
	ControlPlane       ControlPlaneVersionState
	// MachineDeployments and MachinePools are in the topology's order.
	MachineDeployments []WorkerVersionState
	MachinePools       []WorkerVersionState
	// Concurrency is the Cluster's upgrade-concurrency annotation (1 when unset).
	Concurrency int
}

// ControlPlaneVersionState is the control plane as the decision sees it.
type ControlPlaneVersionState struct {
	// Exists is false until the control plane object is created.
	Exists bool
	// Version is the control plane's spec.version.
	Version string
	// Upgrading is true while its Machines are not all at Version (a
	// rollout or scale in progress).
	Upgrading bool
	// Provisioning is true while the control plane reports no version yet
	// (status.version and status.versions unset): its first Machines are
	// still being made. Like Upgrading, it holds the next version back.
	Provisioning bool
	// Kind is the control plane's kind, to name it in messages
	// ("control plane" when empty).
	Kind string
}

// WorkerVersionState is one MachineDeployment or MachinePool of the topology.
type WorkerVersionState struct {
	// Name is the topology's name for it (workers.machineDeployments[].name).
	Name string
	// ObjectName is the object's own name, which messages use for an
	// existing one (Name when empty).
	ObjectName string
	// Exists is false until the object is created.
	Exists bool
	// Version is its spec.template.spec.version.
	Version string
	// Upgrading is true while its Machines are not all at Version.
	Upgrading bool
	// Hold and Defer are the hold-upgrade-sequence and defer-upgrade annotations.
	Hold, Defer bool
}

func (w WorkerVersionState) displayName() string {
	if w.Exists && w.ObjectName != "" {
		return w.ObjectName
	}
	return w.Name
}

// TopologyUpgrade is the decision: the version to write on each part now.
type TopologyUpgrade struct {
	ControlPlaneVersion string
	// MachineDeployments and MachinePools map a topology name to the
	// version to write (for one not created yet: the version to create it at).
	// One that must not be created yet has no entry: it is listed in
	// MachineDeploymentsCreatePending or MachinePoolsCreatePending instead.
	MachineDeployments map[string]string
	MachinePools       map[string]string
	// MachineDeploymentsCreatePending and MachinePoolsCreatePending are the
	// topology names of the workers not to create yet: a new worker waits
	// while the control plane is not stable at the topology's version.
	MachineDeploymentsCreatePending []string
	MachinePoolsCreatePending       []string
	// ControlPlaneUpgradePlan and WorkersUpgradePlan are the versions still
	// ahead of the control plane and of the workers once this decision is
	// written, next first (a step written now has left them): the Cluster's
	// status.controlPlane.upgradePlan and status.workers.upgradePlan (see
	// StatusUpgradePlan). Both are empty when nothing is left to upgrade;
	// WorkersUpgradePlan is empty while no worker exists.
	ControlPlaneUpgradePlan []string
	WorkersUpgradePlan      []string
	// UpgradeStep is the version of the upgrade step under way, for the
	// Cluster's topology.internal.cluster.x-k8s.io/upgrade-step annotation:
	// the control plane's version while the decision found a step ahead of
	// the control plane or of the workers (the one it writes included);
	// empty when no upgrade is under way: the annotation is then removed.
	UpgradeStep string
	// Reason and Message explain what waits, for the TopologyReconciled
	// condition (empty when nothing does).
	Reason, Message string
	// Err is set when no upgrade can be planned (a version that does not
	// parse, a target the class's kubernetesVersions cannot reach, a
	// downgrade). Nothing moves then: every existing part keeps its version
	// and no new worker is created; Reason is ReconcileFailed and Message
	// is Err's text. The caller fails the reconcile with it and leaves the
	// status's upgrade plans as they were.
	Err error
}

// StatusUpgradePlan turns a plan into a status upgradePlan (nil when empty).
// The API keeps at most 32 steps; a longer plan shows its first 32.
func StatusUpgradePlan(versions []string) []clusterv1.StatusUpgradePlanVersion {
	const maxSteps = 32
	if len(versions) == 0 {
		return nil
	}
	out := make([]clusterv1.StatusUpgradePlanVersion, 0, min(len(versions), maxSteps))
	for _, v := range versions[:min(len(versions), maxSteps)] {
		out = append(out, clusterv1.StatusUpgradePlanVersion{Version: v})
	}
	return out
}

// controlPlaneProgress is where the control plane stands in this decision.
type controlPlaneProgress struct {
	current string
	// pending: it is not at the target and does not move now.
	pending bool
	// starting: it moves to the next step now.
	starting bool
	// waitingForWorkers: it is held at its version until the workers reach it
	// (a chained upgrade that would otherwise leave them too far behind).
	waitingForWorkers bool
	// workersUpgrading: it is held because workers are upgrading.
	workersUpgrading bool
	provisioning     bool
	upgrading        bool
}

// stable is true when the control plane is at the target and not moving:
// only then are new workers created.
func (p controlPlaneProgress) stable() bool {
	return !p.provisioning && !p.upgrading && !p.starting && !p.pending
}

// readyForWorkers is true when workers may take their next step: the
// control plane is stable, or it waits for them.
func (p controlPlaneProgress) readyForWorkers() bool {
	return !p.provisioning && !p.upgrading && !p.starting && (!p.pending || p.waitingForWorkers)
}

// PlanTopologyUpgrade decides which versions a topology writes now.
//
// The control plane is created at the topology's version. An existing one
// takes the next step of its plan only when it is neither provisioning nor
// upgrading, no worker is upgrading, and the workers need not catch up
// first. New workers are created at the topology's version, with the
// control plane or once it is stable there. Existing workers follow only
// when the control plane is stable (or waits for them), in the topology's
// order, each to the next step of the workers' plan, at most Concurrency
// upgrading at once (MachineDeployments and MachinePools counted apart, those
// already rolling included); one with defer-upgrade is skipped, and
// hold-upgrade-sequence stops the sequence at the worker that carries it.
func PlanTopologyUpgrade(in TopologyUpgradeInput) TopologyUpgrade {
	out := TopologyUpgrade{
		MachineDeployments: map[string]string{},
		MachinePools:       map[string]string{},
	}
	target, err := parseKube(in.Version)
	if err != nil {
		return refuse(in, fmt.Errorf("spec.topology.version %q is not a Kubernetes version (%v): set it to vMAJOR.MINOR.PATCH", in.Version, err))
	}

	if !in.ControlPlane.Exists {
		// Everything is being created: the control plane and the workers
		// at the topology's version, together (a worker's Machines wait for
		// the control plane through their bootstrap).
		out.ControlPlaneVersion = in.Version
		createOrKeep(in.MachineDeployments, in.Version, out.MachineDeployments)
		createOrKeep(in.MachinePools, in.Version, out.MachinePools)
		return out
	}

	plans, err := computeUpgradePlans(in, target)
	if err != nil {
		return refuse(in, err)
	}
	cp := decideControlPlane(in, target, plans)
	out.ControlPlaneVersion = cp.current

	mds := decideWorkers(in.MachineDeployments, in, target, plans.workers, cp)
	mps := decideWorkers(in.MachinePools, in, target, plans.workers, cp)
	out.MachineDeployments, out.MachineDeploymentsCreatePending = mds.versions, mds.createPending
	out.MachinePools, out.MachinePoolsCreatePending = mps.versions, mps.createPending

	if len(plans.controlPlane) > 0 || len(plans.workers) > 0 {
		out.UpgradeStep = out.ControlPlaneVersion
	}
	left := plansAfter(in, out, target, plans)
	out.ControlPlaneUpgradePlan = left.controlPlane
	if len(out.MachineDeployments) > 0 || len(out.MachinePools) > 0 {
		out.WorkersUpgradePlan = left.workers
	}
	out.Reason, out.Message = explain(in, out, plans, cp, mds, mps)
	return out
}

// plansAfter are the plans as the next decision will find them once this
// one is written: the status shows them, so a step leaves the status in the
// same write that sets it on its object, not one write later.
func plansAfter(in TopologyUpgradeInput, out TopologyUpgrade, target kubeVersion, before upgradePlans) upgradePlans {
	next := in
	next.ControlPlane.Version = out.ControlPlaneVersion
	written := func(workers []WorkerVersionState, versions map[string]string) []WorkerVersionState {
		after := make([]WorkerVersionState, 0, len(workers))
		for _, w := range workers {
			if v, ok := versions[w.Name]; ok {
				w.Exists, w.Version = true, v
			}
			after = append(after, w)
		}
		return after
	}
	next.MachineDeployments = written(in.MachineDeployments, out.MachineDeployments)
	next.MachinePools = written(in.MachinePools, out.MachinePools)
	left, err := computeUpgradePlans(next, target)
	if err != nil {
		// Cannot happen from a state the decision accepted; the plans it
		// started from are then the better report.
		return before
	}
	return left
}

// decideControlPlane picks the control plane's version: its current one, or
// the next step of its plan when nothing holds it back.
func decideControlPlane(in TopologyUpgradeInput, target kubeVersion, plans upgradePlans) controlPlaneProgress {
	cpIn := in.ControlPlane
	p := controlPlaneProgress{
		current:      cpIn.Version,
		provisioning: cpIn.Provisioning,
		upgrading:    cpIn.Upgrading,
	}
	current, _ := parseKube(cpIn.Version) // computeUpgradePlans parsed it
	p.pending = !sameKube(current, target)
	switch {
	case p.provisioning, p.upgrading:
		return p
	case len(plans.workers) > 0 && plans.workers[0] == cpIn.Version:
		// The workers' next stop is the control plane's version: they go
		// there before the control plane goes on.
		p.waitingForWorkers = true
		return p
	case anyUpgrading(in.MachineDeployments) || anyUpgrading(in.MachinePools):
		p.workersUpgrading = true
		return p
	case !p.pending:
		return p
	}
	p.current = plans.controlPlane[0]
	p.starting = true
	p.pending = false
	return p
}

// waitCause is why a worker that is not at the target does not move now.
type waitCause int

const (
	// waitControlPlane: the control plane is not stable and does not wait
	// for the workers.
	waitControlPlane waitCause = iota
	// waitConcurrency: as many workers as allowed are upgrading.
	waitConcurrency
	// waitNextStep: the worker is at the workers' next stop already; it waits
	// for the control plane to move on.
	waitNextStep
	waitCauses
)

// workerDecision is the outcome for one kind of worker.
type workerDecision struct {
	versions      map[string]string
	createPending []string
	// upgrading are the workers rolling now or starting now (display names).
	upgrading []string
	// pending are the workers not at the target that wait, by cause.
	pending [waitCauses][]string
	// deferred are the workers with defer-upgrade; held those stopped by
	// the hold-upgrade-sequence annotation on holder.
	deferred, held []string
	holder         string
}

func (d workerDecision) anyPending() bool {
	for _, names := range d.pending {
		if len(names) > 0 {
			return true
		}
	}
	return false
}

// decideWorkers walks one kind of worker in the topology's order.
func decideWorkers(workers []WorkerVersionState, in TopologyUpgradeInput, target kubeVersion, plan []string, cp controlPlaneProgress) workerDecision {
	d := workerDecision{versions: map[string]string{}}
	concurrency := max(in.Concurrency, 1)
	for _, w := range workers {
		if w.Exists && w.Upgrading {
			d.upgrading = append(d.upgrading, w.displayName())
		}
	}
	holder := ""
	for _, w := range workers {
		if w.Hold && holder == "" {
			holder = w.displayName()
		}
		if !w.Exists {
			if cp.stable() {
				d.versions[w.Name] = in.Version
			} else {
				d.createPending = append(d.createPending, w.Name)
			}
			continue
		}
		d.versions[w.Name] = w.Version
		current, err := parseKube(w.Version)
		if err == nil && sameKube(current, target) {
			continue
		}
		// A worker still rolling to its version is reported as upgrading
		// only, whatever else keeps it from its next step.
		wait := func(list *[]string) {
			if !w.Upgrading {
				*list = append(*list, w.displayName())
			}
		}
		switch {
		case holder != "":
			wait(&d.held)
			d.holder = holder
			continue
		case w.Defer:
			wait(&d.deferred)
			continue
		case len(d.upgrading) >= concurrency:
			wait(&d.pending[waitConcurrency])
			continue
		case !cp.readyForWorkers():
			wait(&d.pending[waitControlPlane])
			continue
		}
		// Without a plan the control plane is stable at the target (a
		// worker without a version is the only way here): it goes there.
		next := in.Version
		if len(plan) > 0 {
			next = plan[0]
		}
		if nextV, nextErr := parseKube(next); err == nil && nextErr == nil && sameKube(current, nextV) {
			wait(&d.pending[waitNextStep])
			continue
		}
		d.versions[w.Name] = next
		if !w.Upgrading {
			d.upgrading = append(d.upgrading, w.displayName())
		}
	}
	return d
}

// createOrKeep is the workers' decision while the control plane is being
// created: new ones at the topology's version, existing ones unchanged.
func createOrKeep(workers []WorkerVersionState, version string, versions map[string]string) {
	for _, w := range workers {
		if w.Exists {
			versions[w.Name] = w.Version
		} else {
			versions[w.Name] = version
		}
	}
}

// refuse is the decision when no plan can be made: every existing part keeps
// its version, nothing new is created, and the condition says why.
func refuse(in TopologyUpgradeInput, err error) TopologyUpgrade {
	out := TopologyUpgrade{
		MachineDeployments: map[string]string{},
		MachinePools:       map[string]string{},
		Reason:             clusterv1.ClusterTopologyReconciledFailedReason,
		Message:            err.Error(),
		Err:                err,
	}
	if in.ControlPlane.Exists {
		out.ControlPlaneVersion = in.ControlPlane.Version
	}
	keep := func(workers []WorkerVersionState, versions map[string]string) (pending []string) {
		for _, w := range workers {
			if w.Exists {
				versions[w.Name] = w.Version
			} else {
				pending = append(pending, w.Name)
			}
		}
		return pending
	}
	out.MachineDeploymentsCreatePending = keep(in.MachineDeployments, out.MachineDeployments)
	out.MachinePoolsCreatePending = keep(in.MachinePools, out.MachinePools)
	return out
}

func anyExists(workers []WorkerVersionState) bool {
	for _, w := range workers {
		if w.Exists {
			return true
		}
	}
	return false
}

func anyUpgrading(workers []WorkerVersionState) bool {
	for _, w := range workers {
		if w.Exists && w.Upgrading {
			return true
		}
	}
	return false
}
