package plan_test

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/plan"
)

func ExamplePlanRollout() {
	// Three Machines run an old template; the MachineDeployment now has a
	// new one, and allows one extra Machine and none unavailable.
	surge, unavailable := intstr.FromInt32(1), intstr.FromInt32(0)
	in := plan.RolloutInput{
		Replicas: 3,
		Strategy: plan.RolloutStrategy{Type: plan.RollingUpdate, MaxSurge: &surge, MaxUnavailable: &unavailable},
		MachineSets: []plan.MachineSetState{
			{Name: "md-old", Created: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), Replicas: 3, Machines: 3, Available: 3},
		},
	}
	p, err := plan.PlanRollout(in)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(p.Create.Reason)

	// The controller created md-new with one replica; its Machine is now
	// available, so one old Machine may go.
	in.MachineSets = append(in.MachineSets, plan.MachineSetState{
		Name: "md-new", Created: time.Date(2025, 2, 1, 0, 0, 0, 0, time.UTC), UpToDate: true, Replicas: 1, Machines: 1, Available: 1,
	})
	p, err = plan.PlanRollout(in)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, c := range p.Changes() {
		fmt.Printf("%s: %s\n", c.Name, c.Reason)
	}
	// Output:
	// create a MachineSet for the new template with 1 of 3 replicas, keeping at most 4 Machines in all (3 replicas, maxSurge 1)
	// md-old: scale down old MachineSet from 3 to 2 replicas: removes 1 available Machine, keeping at least 3 available (3 replicas, maxUnavailable 0)
}

func ExampleMachinesToDelete() {
	created := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	machines := []plan.Machine{
		{Name: "m-a", Created: created},
		{Name: "m-b", Created: created.Add(time.Hour)},
		{Name: "m-c", Created: created.Add(2 * time.Hour), Deleting: true},
		{Name: "m-d", Created: created.Add(3 * time.Hour), Unhealthy: true},
		{Name: "m-e", Created: created.Add(4 * time.Hour)},
	}
	// Shed three Machines: m-c is already going, the unhealthy m-d is next,
	// then the oldest of the rest.
	fmt.Println(plan.MachinesToDelete(machines, 3, clusterv1.OldestMachineSetDeletionOrder))
	// Output:
	// [m-d m-a]
}

func ExampleNextClusterDeletionStep() {
	step := plan.NextClusterDeletionStep(plan.ClusterDescendants{
		MachineDeployments:    []plan.Object{{Name: "workers"}},
		OwnedWorkerMachines:   []plan.Object{{Name: "workers-a"}, {Name: "workers-b"}, {Name: "workers-c"}},
		ControlPlane:          &plan.Object{Kind: "KubeadmControlPlane", Name: "cp"},
		ControlPlaneMachines:  []plan.Object{{Name: "cp-1"}},
		InfrastructureCluster: &plan.Object{Kind: "LocalCluster", Name: "c1"},
	})
	fmt.Println(step.MachineDeployments, step.ControlPlane)
	fmt.Println(step.Waiting)

	step = plan.NextClusterDeletionStep(plan.ClusterDescendants{
		ControlPlane:          &plan.Object{Kind: "KubeadmControlPlane", Name: "cp", Deleting: true},
		ControlPlaneMachines:  []plan.Object{{Name: "cp-1", Deleting: true}},
		InfrastructureCluster: &plan.Object{Kind: "LocalCluster", Name: "c1"},
	})
	fmt.Println(step.ControlPlane, step.InfrastructureCluster)
	fmt.Println(step.Waiting)
	// Output:
	// [workers] false
	// waiting for 1 MachineDeployment (workers) and 3 worker Machines (workers-a, workers-b and workers-c) to be deleted
	// false false
	// waiting for KubeadmControlPlane cp and 1 control plane Machine (cp-1) to be deleted
}
