package desired

import (
	"capstan.dev/capstan/internal/topology"
)

// patchInputs lists the blueprint's templates for the patches, each with the
// variables its part of the topology sees.
func patchInputs(in Input, bp *blueprint, unpatched *State) ([]*topology.Template, error) {
	var out []*topology.Template
	out = append(out, &topology.Template{Role: topology.InfrastructureCluster, Object: bp.infrastructureCluster})
	out = append(out, &topology.Template{Role: topology.ControlPlane, Object: bp.controlPlane})
	if bp.controlPlaneMachineInfrastructure != nil {
		out = append(out, &topology.Template{Role: topology.ControlPlaneMachineInfrastructure, Object: bp.controlPlaneMachineInfrastructure})
	}
	for _, md := range bp.machineDeployments {
		out = append(out,
			&topology.Template{Role: topology.MachineDeploymentBootstrap, Class: md.class.Class, Topology: md.topology.Name, Object: md.bootstrap},
			&topology.Template{Role: topology.MachineDeploymentInfrastructure, Class: md.class.Class, Topology: md.topology.Name, Object: md.infrastructure})
	}
	for _, mp := range bp.machinePools {
		out = append(out,
			&topology.Template{Role: topology.MachinePoolBootstrap, Class: mp.class.Class, Topology: mp.topology.Name, Object: mp.bootstrap},
			&topology.Template{Role: topology.MachinePoolInfrastructure, Class: mp.class.Class, Topology: mp.topology.Name, Object: mp.infrastructure})
	}
	return out, nil
}
