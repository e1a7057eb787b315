package plan_test

import (
	"reflect"
	"testing"

	"capstan.dev/capstan/internal/plan"
)

func objs(names ...string) []plan.Object {
	var out []plan.Object
	for _, n := range names {
		out = append(out, plan.Object{Name: n})
	}
	return out
}

func deleting(names ...string) []plan.Object {
	out := objs(names...)
	for i := range out {
		out[i].Deleting = true
	}
	return out
}

func TestNextClusterDeletionStep(t *testing.T) {
	cp := &plan.Object{Kind: "KubeadmControlPlane", Name: "cp"}
	cpDeleting := &plan.Object{Kind: "KubeadmControlPlane", Name: "cp", Deleting: true}
	infra := &plan.Object{Kind: "LocalCluster", Name: "c1"}
	infraDeleting := &plan.Object{Kind: "LocalCluster", Name: "c1", Deleting: true}

	tests := []struct {
		name string
		in   plan.ClusterDescendants
		want plan.ClusterDeletionStep
	}{
		{
			name: "workers go first, all at once; the control plane and infrastructure wait",
			in: plan.ClusterDescendants{
				MachineDeployments:    objs("md-b", "md-a"),
				MachineSets:           objs("ms"),
				MachinePools:          objs("mp"),
				WorkerMachines:        objs("w-2", "w-1"),
				OwnedWorkerMachines:   objs("o-1", "o-2", "o-3", "o-4"),
				ControlPlane:          cp,
				ControlPlaneMachines:  objs("cp-1", "cp-2", "cp-3"),
				InfrastructureCluster: infra,
			},
			want: plan.ClusterDeletionStep{
				MachineDeployments: []string{"md-a", "md-b"},
				MachineSets:        []string{"ms"},
				MachinePools:       []string{"mp"},
				Machines:           []string{"w-1", "w-2"},
				Waiting:            "waiting for 2 MachineDeployments (md-a and md-b), 1 MachineSet (ms), 1 MachinePool (mp) and 6 worker Machines (o-1, o-2, o-3, o-4, w-1 and 1 more) to be deleted",
			},
		},
		{
			name: "workers already being deleted are waited for, not deleted again",
			in: plan.ClusterDescendants{
				MachineDeployments:   deleting("md"),
				WorkerMachines:       append(deleting("w-1"), objs("w-2")...),
				OwnedWorkerMachines:  objs("o-1", "o-2"),
				ControlPlane:         cp,
				ControlPlaneMachines: objs("cp-1"),
			},
			want: plan.ClusterDeletionStep{
				Machines: []string{"w-2"},
				Waiting:  "waiting for 1 MachineDeployment (md) and 4 worker Machines (o-1, o-2, w-1 and w-2) to be deleted",
			},
		},
		{
			name: "worker Machines left behind by deleted MachineDeployments hold the control plane back",
			in: plan.ClusterDescendants{
				OwnedWorkerMachines:   objs("o-1", "o-2", "o-3"),
				ControlPlane:          cp,
				InfrastructureCluster: infra,
			},
			want: plan.ClusterDeletionStep{Waiting: "waiting for 3 worker Machines (o-1, o-2 and o-3) to be deleted"},
		},
		{
			name: "a standalone worker Machine holds the control plane back",
			in: plan.ClusterDescendants{
				WorkerMachines: objs("w"),
				ControlPlane:   cp,
			},
			want: plan.ClusterDeletionStep{Machines: []string{"w"}, Waiting: "waiting for 1 worker Machine (w) to be deleted"},
		},
		{
			name: "no worker left: the control plane goes, and removes its own Machines",
			in: plan.ClusterDescendants{
				ControlPlane:          cp,
				ControlPlaneMachines:  objs("cp-1", "cp-2", "cp-3"),
				InfrastructureCluster: infra,
			},
			want: plan.ClusterDeletionStep{
				ControlPlane: true,
				Waiting:      "waiting for KubeadmControlPlane cp and 3 control plane Machines (cp-1, cp-2 and cp-3) to be deleted",
			},
		},
		{
			name: "the control plane is being deleted",
			in: plan.ClusterDescendants{
				ControlPlane:          cpDeleting,
				InfrastructureCluster: infra,
			},
			want: plan.ClusterDeletionStep{Waiting: "waiting for KubeadmControlPlane cp to be deleted"},
		},
		{
			name: "without a control plane object its Machines are deleted directly",
			in: plan.ClusterDescendants{
				ControlPlaneMachines:  append(objs("cp-2", "cp-1"), deleting("cp-3")...),
				InfrastructureCluster: infra,
			},
			want: plan.ClusterDeletionStep{
				Machines: []string{"cp-1", "cp-2"},
				Waiting:  "waiting for 3 control plane Machines (cp-1, cp-2 and cp-3) to be deleted",
			},
		},
		{
			name: "the control plane is gone but its Machines are not: the infrastructure waits",
			in: plan.ClusterDescendants{
				ControlPlaneMachines:  deleting("cp-1"),
				InfrastructureCluster: infra,
			},
			want: plan.ClusterDeletionStep{Waiting: "waiting for 1 control plane Machine (cp-1) to be deleted"},
		},
		{
			name: "only the infrastructure cluster is left",
			in:   plan.ClusterDescendants{InfrastructureCluster: infra},
			want: plan.ClusterDeletionStep{InfrastructureCluster: true, Waiting: "waiting for LocalCluster c1 to be deleted"},
		},
		{
			name: "the infrastructure cluster is being deleted",
			in:   plan.ClusterDescendants{InfrastructureCluster: infraDeleting},
			want: plan.ClusterDeletionStep{Waiting: "waiting for LocalCluster c1 to be deleted"},
		},
		{
			name: "objects without a kind are named by their role",
			in: plan.ClusterDescendants{
				ControlPlane:          &plan.Object{Name: "cp", Deleting: true},
				InfrastructureCluster: &plan.Object{Name: "c1"},
			},
			want: plan.ClusterDeletionStep{Waiting: "waiting for control plane cp to be deleted"},
		},
		{
			name: "nothing is left",
			want: plan.ClusterDeletionStep{Done: true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := plan.NextClusterDeletionStep(tt.in); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("NextClusterDeletionStep =\n%+v\nwant\n%+v", got, tt.want)
			}
		})
	}
}

// TestClusterDeletionRunsToTheEnd deletes what each step asks for, one tier
// at a time, and checks that the tiers come in order and the last step is
// Done.
func TestClusterDeletionRunsToTheEnd(t *testing.T) {
	d := plan.ClusterDescendants{
		MachineDeployments:    objs("md"),
		WorkerMachines:        objs("w"),
		OwnedWorkerMachines:   objs("o-1", "o-2"),
		ControlPlane:          &plan.Object{Name: "cp"},
		ControlPlaneMachines:  objs("cp-1"),
		InfrastructureCluster: &plan.Object{Name: "c1"},
	}
	var tiers []string
	for range 10 {
		step := plan.NextClusterDeletionStep(d)
		switch {
		case step.Done:
			if want := []string{"workers", "control plane", "infrastructure"}; !reflect.DeepEqual(tiers, want) {
				t.Fatalf("tiers = %v, want %v", tiers, want)
			}
			return
		case len(step.MachineDeployments) > 0:
			tiers = append(tiers, "workers")
			d.MachineDeployments, d.WorkerMachines, d.OwnedWorkerMachines = nil, nil, nil
		case step.ControlPlane:
			tiers = append(tiers, "control plane")
			d.ControlPlane, d.ControlPlaneMachines = nil, nil
		case step.InfrastructureCluster:
			tiers = append(tiers, "infrastructure")
			d.InfrastructureCluster = nil
		default:
			t.Fatalf("step %+v deletes nothing though nothing is being deleted", step)
		}
	}
	t.Fatal("deletion did not finish")
}
