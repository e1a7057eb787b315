package plan_test

import (
	"fmt"

	"capstan.dev/capstan/internal/plan"
)

func ExamplePlanTopologyUpgrade() {
	// A Cluster at v1.30.4 is asked for v1.32.1; its class lists the
	// versions it supports, so the control plane goes through v1.31.
	in := plan.TopologyUpgradeInput{
		Version:            "v1.32.1",
		KubernetesVersions: []string{"v1.30.4", "v1.31.0", "v1.31.3", "v1.32.1"},
		ControlPlane:       plan.ControlPlaneVersionState{Exists: true, Version: "v1.30.4", Kind: "KubeadmControlPlane"},
		MachineDeployments: []plan.WorkerVersionState{
			{Name: "md-0", Exists: true, Version: "v1.30.4"},
			{Name: "md-1", Exists: true, Version: "v1.30.4"},
		},
	}
	d := plan.PlanTopologyUpgrade(in)
	fmt.Println(d.ControlPlaneVersion, d.ControlPlaneUpgradePlan, d.MachineDeployments)
	fmt.Println(d.Message)

	// Later the control plane is at v1.32.1 and stable: the workers
	// follow, one at a time, straight to the target (two minors behind is
	// within the skew Kubernetes allows).
	in.ControlPlane.Version = "v1.32.1"
	d = plan.PlanTopologyUpgrade(in)
	fmt.Println(d.ControlPlaneVersion, d.MachineDeployments, d.WorkersUpgradePlan)
	fmt.Println(d.Message)
	// Output:
	// v1.31.3 [v1.32.1] map[md-0:v1.30.4 md-1:v1.30.4]
	// Cluster is upgrading to v1.32.1
	// * KubeadmControlPlane upgrading to version v1.31.3 (then v1.32.1)
	// * MachineDeployments md-0, md-1 pending upgrade to version v1.32.1, waiting for the KubeadmControlPlane upgrade to complete
	// v1.32.1 map[md-0:v1.32.1 md-1:v1.30.4] [v1.32.1]
	// Cluster is upgrading to v1.32.1
	// * MachineDeployment md-0 upgrading to version v1.32.1
	// * MachineDeployment md-1 pending upgrade to version v1.32.1, waiting for MachineDeployment md-0 to finish upgrading (topology.cluster.x-k8s.io/upgrade-concurrency: 1)
}
