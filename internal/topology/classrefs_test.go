package topology

import (
	"reflect"
	"testing"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

func TestClassTemplateRefsListsEverySetReferenceInSpecOrder(t *testing.T) {
	ref := func(kind, name string) clusterv1.ClusterClassTemplateReference {
		return clusterv1.ClusterClassTemplateReference{APIVersion: "infrastructure.cluster.x-k8s.io/v1beta2", Kind: kind, Name: name}
	}
	cc := &clusterv1.ClusterClass{}
	cc.Spec.Infrastructure.TemplateRef = ref("DockerClusterTemplate", "c")
	cc.Spec.ControlPlane.TemplateRef = ref("KubeadmControlPlaneTemplate", "cp")
	// No control plane machine template: a control plane without Machines.
	cc.Spec.Workers.MachineDeployments = []clusterv1.MachineDeploymentClass{
		{Class: "default-worker"},
		{Class: "gpu"},
	}
	cc.Spec.Workers.MachineDeployments[0].Bootstrap.TemplateRef = ref("KubeadmConfigTemplate", "w")
	cc.Spec.Workers.MachineDeployments[0].Infrastructure.TemplateRef = ref("DockerMachineTemplate", "m")
	cc.Spec.Workers.MachineDeployments[1].Bootstrap.TemplateRef = ref("KubeadmConfigTemplate", "w")
	cc.Spec.Workers.MachinePools = []clusterv1.MachinePoolClass{{Class: "pool"}}
	cc.Spec.Workers.MachinePools[0].Infrastructure.TemplateRef = ref("DockerMachinePoolTemplate", "p")

	var got []string
	for _, r := range ClassTemplateRefs(cc) {
		got = append(got, r.Field+" "+r.Ref.Name)
	}
	want := []string{
		"spec.infrastructure.templateRef c",
		"spec.controlPlane.templateRef cp",
		"spec.workers.machineDeployments[default-worker].bootstrap.templateRef w",
		"spec.workers.machineDeployments[default-worker].infrastructure.templateRef m",
		"spec.workers.machineDeployments[gpu].bootstrap.templateRef w",
		"spec.workers.machinePools[pool].infrastructure.templateRef p",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}
}
