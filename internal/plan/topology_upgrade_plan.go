package plan

import (
	"fmt"
)

// upgradePlans are the versions still ahead, next first: the control plane
// goes through each of controlPlane; the workers through each of workers,
// never past the control plane.
type upgradePlans struct {
	controlPlane []string
	workers      []string
}

// lowestWorker is the existing worker that runs the lowest version: where
// the workers' plan starts.
type lowestWorker struct {
	version kubeVersion
	found   bool
}

// computeUpgradePlans works out the steps from where the control plane and
// the workers are to the topology's version. The control plane moves at most
// one minor a step: without the class's kubernetesVersions the topology may
// only be one minor ahead of it; with them, it goes through the highest
// listed version of each minor in between. The workers take as few steps as
// the version skew allows (at most three minors behind the control plane),
// each step a version the control plane runs or will run, the last the
// target.
func computeUpgradePlans(in TopologyUpgradeInput, target kubeVersion) (upgradePlans, error) {
	cp, err := parseKube(in.ControlPlane.Version)
	if err != nil {
		return upgradePlans{}, fmt.Errorf("the control plane's spec.version %q is not a Kubernetes version (%v): set it to vMAJOR.MINOR.PATCH", in.ControlPlane.Version, err)
	}
	if cp.sem.Major() != target.sem.Major() {
		return upgradePlans{}, fmt.Errorf("spec.topology.version %s changes the major version of the control plane's %s: a managed topology only moves between minors of one major version", in.Version, cp.raw)
	}
	if compareKube(target, cp, true) == versionLower {
		return upgradePlans{}, fmt.Errorf("spec.topology.version %s is lower than the control plane's version %s: a managed topology is never downgraded; set spec.topology.version to %s or higher", in.Version, cp.raw, cp.raw)
	}
	lowest, err := lowestWorkerVersion(in, cp, target)
	if err != nil {
		return upgradePlans{}, err
	}
	if sameKube(cp, target) && (!lowest.found || sameKube(lowest.version, target)) {
		return upgradePlans{}, nil
	}

	var steps []kubeVersion
	if !sameKube(cp, target) {
		if len(in.KubernetesVersions) > 0 {
			steps, err = stepsFromClassVersions(in.KubernetesVersions, cp, target)
		} else {
			steps, err = stepOneMinor(cp, target)
		}
		if err != nil {
			return upgradePlans{}, err
		}
		if err := checkControlPlaneSteps(steps, cp, target, len(in.KubernetesVersions) > 0); err != nil {
			return upgradePlans{}, err
		}
	}

	var plans upgradePlans
	for _, s := range steps {
		plans.controlPlane = append(plans.controlPlane, s.raw)
	}
	if lowest.found && !sameKube(lowest.version, target) {
		plans.workers, err = workerSteps(lowest.version, cp, steps, target)
		if err != nil {
			return upgradePlans{}, err
		}
	}
	return plans, nil
}

// lowestWorkerVersion finds the lowest version an existing worker runs.
// Workers without a version are left out. Two versions that cannot be
// ordered (build metadata) resolve towards the one that is not the control
// plane's, since a worker is either at the control plane's version or behind
// it. A worker above the target is refused: the topology would lower it.
func lowestWorkerVersion(in TopologyUpgradeInput, cp, target kubeVersion) (lowestWorker, error) {
	var low lowestWorker
	check := func(kind string, workers []WorkerVersionState) error {
		for _, w := range workers {
			if !w.Exists || w.Version == "" {
				continue
			}
			v, err := parseKube(w.Version)
			if err != nil {
				return fmt.Errorf("%s %s has spec.template.spec.version %q, which is not a Kubernetes version (%v): set it to vMAJOR.MINOR.PATCH", kind, w.displayName(), w.Version, err)
			}
			if compareKube(v, target, true) == versionHigher {
				return fmt.Errorf("%s %s runs %s, above spec.topology.version %s: a managed topology is never downgraded; set spec.topology.version to %s or higher", kind, w.displayName(), w.Version, in.Version, w.Version)
			}
			if !low.found || isBelow(v, low.version, cp) {
				low = lowestWorker{version: v, found: true}
			}
		}
		return nil
	}
	if err := check("MachineDeployment", in.MachineDeployments); err != nil {
		return lowestWorker{}, err
	}
	if err := check("MachinePool", in.MachinePools); err != nil {
		return lowestWorker{}, err
	}
	return low, nil
}

func isBelow(v, low, cp kubeVersion) bool {
	switch compareKube(v, low, true) {
	case versionLower:
		return true
	case versionUnordered:
		return !sameKube(v, cp)
	}
	return false
}

// stepOneMinor is the plan when the class lists no versions: straight to
// the target, which may be at most one minor ahead.
func stepOneMinor(cp, target kubeVersion) ([]kubeVersion, error) {
	if target.minor() > cp.minor()+1 {
		return nil, fmt.Errorf("spec.topology.version %s is more than one minor version above the control plane's %s: raise it one minor at a time (next v%d.%d.x), or list the versions in between in the ClusterClass's spec.kubernetesVersions", target.raw, cp.raw, cp.sem.Major(), cp.minor()+1)
	}
	return []kubeVersion{target}, nil
}

// stepsFromClassVersions takes, from the class's list (lowest first), the
// versions above the control plane's up to the target, and keeps the last
// one listed for each minor: the control plane visits every minor once. A
// patch upgrade within the control plane's minor is a single step.
func stepsFromClassVersions(list []string, cp, target kubeVersion) ([]kubeVersion, error) {
	var candidates []kubeVersion
	for i, s := range list {
		v, err := parseKube(s)
		if err != nil {
			return nil, fmt.Errorf("the ClusterClass's spec.kubernetesVersions[%d] %q is not a Kubernetes version (%v): write it as vMAJOR.MINOR.PATCH", i, s, err)
		}
		// Versions up to the control plane's are behind it, whatever their
		// build metadata: a step is always to a higher patch or minor.
		if compareKube(v, cp, false) != versionHigher {
			continue
		}
		if compareKube(v, target, true) == versionHigher {
			break
		}
		candidates = append(candidates, v)
		if sameKube(v, target) {
			break
		}
	}
	if len(candidates) == 0 {
		return nil, nil
	}
	var steps []kubeVersion
	minor := cp.minor()
	if minor == target.minor() {
		steps = append(steps, candidates[0])
	}
	for _, v := range candidates {
		switch {
		case v.minor() > minor:
			steps = append(steps, v)
		case v.minor() == minor && len(steps) > 0:
			steps[len(steps)-1] = v
		}
		minor = v.minor()
	}
	return steps, nil
}

// checkControlPlaneSteps makes sure the control plane's steps go up, one
// minor at a time at most, and end at the target; each error says which
// field to change.
func checkControlPlaneSteps(steps []kubeVersion, cp, target kubeVersion, fromClass bool) error {
	prev := cp
	for _, s := range steps {
		if c := compareKube(s, prev, true); c == versionLower || c == versionEqual {
			return fmt.Errorf("the ClusterClass's spec.kubernetesVersions lists %s after %s: list the versions from lowest to highest", s.raw, prev.raw)
		}
		if s.minor() != prev.minor() && s.minor() != prev.minor()+1 {
			return fmt.Errorf("the ClusterClass's spec.kubernetesVersions lists no v%d.%d version, which the control plane must go through from %s to spec.topology.version %s: add one", prev.sem.Major(), prev.minor()+1, cp.raw, target.raw)
		}
		prev = s
	}
	if !sameKube(prev, target) {
		if fromClass {
			return fmt.Errorf("spec.topology.version %s is not in the ClusterClass's spec.kubernetesVersions: choose a listed version, or add %s to the list", target.raw, target.raw)
		}
		return fmt.Errorf("spec.topology.version %s cannot be reached from the control plane's %s", target.raw, cp.raw)
	}
	return nil
}

// workerSteps is the workers' plan from the lowest worker version: a stop
// every third minor (the most a worker may trail the control plane), each
// the version the control plane runs or will run for that minor, then the
// target.
func workerSteps(lowest, cp kubeVersion, cpSteps []kubeVersion, target kubeVersion) ([]string, error) {
	byMinor := map[uint]string{cp.minor(): cp.raw}
	for _, s := range cpSteps {
		byMinor[s.minor()] = s.raw
	}
	var steps []string
	if target.minor() > lowest.minor() {
		for i := uint(3); i < target.minor()-lowest.minor(); i += 3 {
			v, ok := byMinor[lowest.minor()+i]
			if !ok {
				return nil, fmt.Errorf("workers run %s, more than three minor versions behind the control plane's %s: the upgrade to %s cannot keep the version skew Kubernetes allows; bring the workers to v%d.%d or later first", lowest.raw, cp.raw, target.raw, cp.sem.Major(), cp.minor()-3)
			}
			steps = append(steps, v)
		}
	}
	if len(steps) == 0 || steps[len(steps)-1] != target.raw {
		steps = append(steps, target.raw)
	}
	return steps, nil
}
