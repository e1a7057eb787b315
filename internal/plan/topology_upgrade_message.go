package plan

import (
	"fmt"
	"strings"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

// explain builds the TopologyReconciled reason and message of an upgrade
// decision: empty when nothing is upgrading or waiting. The reason is
// ClusterUpgrading, except when the only thing left is workers the user
// deferred or held: then it says which kind waits on the user. The message
// has one line per part, saying what it waits for.
func explain(in TopologyUpgradeInput, out TopologyUpgrade, plans upgradePlans, cp controlPlaneProgress, mds, mps workerDecision) (reason, message string) {
	busy := func(d workerDecision) bool {
		return len(d.upgrading) > 0 || d.anyPending() || len(d.deferred) > 0 || len(d.held) > 0 || len(d.createPending) > 0
	}
	if !cp.pending && !cp.starting && !cp.upgrading && !busy(mds) && !busy(mps) {
		return "", ""
	}

	cpKind := in.ControlPlane.Kind
	if cpKind == "" {
		cpKind = "control plane"
	}
	var lines []string
	add := func(format string, args ...any) { lines = append(lines, fmt.Sprintf(format, args...)) }

	switch {
	case cp.starting || cp.upgrading:
		add("%s upgrading to version %s%s", cpKind, out.ControlPlaneVersion, thenVersions(plans.controlPlane, out.ControlPlaneVersion))
	case len(plans.controlPlane) > 0:
		add("%s pending upgrade to version %s%s", cpKind, strings.Join(plans.controlPlane, ", "), controlPlaneWait(in, cp, mds, mps))
	}

	workersPlan := plans.workers
	if len(workersPlan) == 0 {
		workersPlan = []string{in.Version}
	}
	describe := func(d workerDecision, kind, kinds string) {
		if len(d.upgrading) > 0 {
			add("%s upgrading to version %s%s", namedList(kind, kinds, d.upgrading), out.ControlPlaneVersion, thenVersions(plans.workers, out.ControlPlaneVersion))
		}
		pendingTo := strings.Join(workersPlan, ", ")
		if names := d.pending[waitControlPlane]; len(names) > 0 {
			add("%s pending upgrade to version %s, waiting for the %s upgrade to complete", namedList(kind, kinds, names), pendingTo, cpKind)
		}
		if names := d.pending[waitNextStep]; len(names) > 0 {
			add("%s pending upgrade to version %s, waiting for the %s to move to its next version", namedList(kind, kinds, names), pendingTo, cpKind)
		}
		if names := d.pending[waitConcurrency]; len(names) > 0 {
			add("%s pending upgrade to version %s, waiting for %s to finish upgrading (%s: %d)", namedList(kind, kinds, names), pendingTo, namedList(kind, kinds, d.upgrading), clusterv1.ClusterTopologyUpgradeConcurrencyAnnotation, max(in.Concurrency, 1))
		}
		if len(d.held) > 0 {
			add("%s upgrade to version %s held by the %s annotation on %s", namedList(kind, kinds, d.held), out.ControlPlaneVersion, clusterv1.ClusterTopologyHoldUpgradeSequenceAnnotation, d.holder)
		}
		if len(d.deferred) > 0 {
			add("%s upgrade to version %s deferred by the %s annotation", namedList(kind, kinds, d.deferred), out.ControlPlaneVersion, clusterv1.ClusterTopologyDeferUpgradeAnnotation)
		}
		if len(d.createPending) > 0 {
			add("%s to be created once the %s upgrade is complete", namedList(kind, kinds, d.createPending), cpKind)
		}
	}
	describe(mds, "MachineDeployment", "MachineDeployments")
	describe(mps, "MachinePool", "MachinePools")

	reason = clusterv1.ClusterTopologyReconciledClusterUpgradingReason
	waitsOnUser := func(d workerDecision) bool {
		return len(d.deferred)+len(d.held) > 0 && !cp.starting && !cp.upgrading && len(d.upgrading) == 0 && !d.anyPending()
	}
	switch {
	case waitsOnUser(mds):
		reason = clusterv1.ClusterTopologyReconciledMachineDeploymentsUpgradeDeferredReason
	case waitsOnUser(mps):
		reason = clusterv1.ClusterTopologyReconciledMachinePoolsUpgradeDeferredReason
	}

	message = "Cluster is upgrading to " + in.Version
	for _, l := range lines {
		message += "\n* " + l
	}
	return reason, message
}

// controlPlaneWait says what a control plane that does not move waits for.
func controlPlaneWait(in TopologyUpgradeInput, cp controlPlaneProgress, mds, mps workerDecision) string {
	switch {
	case cp.provisioning:
		return ", waiting for it to finish provisioning"
	case cp.waitingForWorkers:
		behind := func(workers []WorkerVersionState) (names []string) {
			for _, w := range workers {
				if w.Exists && w.Version != in.ControlPlane.Version {
					names = append(names, w.displayName())
				}
			}
			return names
		}
		return fmt.Sprintf(", waiting for %s to reach %s first (workers may not fall more than three minor versions behind)", workerNames(behind(in.MachineDeployments), behind(in.MachinePools)), in.ControlPlane.Version)
	case cp.workersUpgrading:
		return fmt.Sprintf(", waiting for %s to finish upgrading", workerNames(mds.upgrading, mps.upgrading))
	}
	return ""
}

// workerNames names MachineDeployments and MachinePools together.
func workerNames(mds, mps []string) string {
	var parts []string
	if len(mds) > 0 {
		parts = append(parts, namedList("MachineDeployment", "MachineDeployments", mds))
	}
	if len(mps) > 0 {
		parts = append(parts, namedList("MachinePool", "MachinePools", mps))
	}
	if len(parts) == 0 {
		return "the workers"
	}
	return strings.Join(parts, " and ")
}

// thenVersions lists the steps of a plan after the one under way:
// " (then v1.32.0, v1.33.0)", or nothing.
func thenVersions(plan []string, now string) string {
	var rest []string
	for _, v := range plan {
		if v != now {
			rest = append(rest, v)
		}
	}
	if len(rest) == 0 {
		return ""
	}
	return " (then " + strings.Join(rest, ", ") + ")"
}

// namedList names up to three objects of a kind, in the order given:
// "MachineDeployment md-0", "MachineDeployments md-0, md-1, md-2 and 2 more".
func namedList(kind, kinds string, names []string) string {
	const shown = 3
	if len(names) == 1 {
		return kind + " " + names[0]
	}
	if len(names) <= shown {
		return kinds + " " + strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s %s and %d more", kinds, strings.Join(names[:shown], ", "), len(names)-shown)
}
