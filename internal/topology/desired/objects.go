package desired

import (
	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/contract"
	"capstan.dev/capstan/internal/plan"
)

// build makes every object of the topology from the blueprint's templates
// (patched or not) under the given names and versions.
func build(in Input, bp *blueprint, n objectNames, upgrade plan.TopologyUpgrade) (*State, error) {
	state := &State{
		MachineDeployments: map[string]*MachineDeployment{},
		MachinePools:       map[string]*MachinePool{},
		Upgrade:            upgrade,
	}
	var err error
	if state.InfrastructureCluster, err = objectFromTemplate(in, bp.infrastructureCluster, n.infrastructureCluster, nil, nil, false); err != nil {
		return nil, err
	}
	if bp.controlPlaneMachineInfrastructure != nil {
		state.ControlPlaneMachineInfrastructure = templateFromTemplate(in, bp.controlPlaneMachineInfrastructure, n.controlPlaneMachineInfrastructure, nil)
	}
	if state.ControlPlane, err = buildControlPlane(in, bp, n, controlPlaneVersion(in, upgrade.ControlPlaneVersion)); err != nil {
		return nil, err
	}
	state.ControlPlaneHealthCheck = controlPlaneHealthCheck(in, bp, n.controlPlane)

	for _, md := range bp.machineDeployments {
		name := md.topology.Name
		state.MachineDeployments[name] = buildMachineDeployment(in, md, n.machineDeployments[name], workerVersion(in, upgrade.MachineDeployments, name, currentDeploymentVersion(in, name)))
	}
	for _, mp := range bp.machinePools {
		name := mp.topology.Name
		if state.MachinePools[name], err = buildMachinePool(in, mp, n.machinePools[name], workerVersion(in, upgrade.MachinePools, name, currentPoolVersion(in, name))); err != nil {
			return nil, err
		}
	}

	cluster := in.Cluster.DeepCopy()
	cluster.Labels = merged(cluster.Labels, map[string]string{
		clusterv1.ClusterNameLabel:          cluster.Name,
		clusterv1.ClusterTopologyOwnedLabel: "",
	})
	// The upgrade step tells the control plane and MachineSets which
	// version a chained upgrade is at; it goes once no upgrade is under way.
	if upgrade.UpgradeStep != "" {
		cluster.Annotations = merged(cluster.Annotations, map[string]string{UpgradeStepAnnotation: upgrade.UpgradeStep})
	} else if _, ok := cluster.Annotations[UpgradeStepAnnotation]; ok {
		cluster.Annotations = merged(cluster.Annotations, nil)
		delete(cluster.Annotations, UpgradeStepAnnotation)
	}
	cluster.Spec.InfrastructureRef = contract.ReferenceTo(state.InfrastructureCluster)
	cluster.Spec.ControlPlaneRef = contract.ReferenceTo(state.ControlPlane)
	state.Cluster = cluster
	return state, nil
}
