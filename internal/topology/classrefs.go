package topology

import (
	"k8s.io/apimachinery/pkg/util/validation/field"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

// ClassTemplateRef is one template reference of a ClusterClass, with the
// field that holds it, for messages that tell the user what to fix.
type ClassTemplateRef struct {
	// Field is the reference's path in the class, worker classes by name:
	// spec.workers.machineDeployments[default-worker].bootstrap.templateRef.
	Field string
	Ref   clusterv1.ClusterClassTemplateReference
}

// ClassTemplateRefs lists the template references a class sets, in the
// order of its spec. Several classes may share a template: it is listed
// once for each reference.
func ClassTemplateRefs(cc *clusterv1.ClusterClass) []ClassTemplateRef {
	var out []ClassTemplateRef
	add := func(path *field.Path, ref clusterv1.ClusterClassTemplateReference) {
		if ref.IsDefined() {
			out = append(out, ClassTemplateRef{Field: path.String(), Ref: ref})
		}
	}
	spec := field.NewPath("spec")
	add(spec.Child("infrastructure", "templateRef"), cc.Spec.Infrastructure.TemplateRef)
	add(spec.Child("controlPlane", "templateRef"), cc.Spec.ControlPlane.TemplateRef)
	add(spec.Child("controlPlane", "machineInfrastructure", "templateRef"), cc.Spec.ControlPlane.MachineInfrastructure.TemplateRef)
	for _, md := range cc.Spec.Workers.MachineDeployments {
		p := spec.Child("workers", "machineDeployments").Key(md.Class)
		add(p.Child("bootstrap", "templateRef"), md.Bootstrap.TemplateRef)
		add(p.Child("infrastructure", "templateRef"), md.Infrastructure.TemplateRef)
	}
	for _, mp := range cc.Spec.Workers.MachinePools {
		p := spec.Child("workers", "machinePools").Key(mp.Class)
		add(p.Child("bootstrap", "templateRef"), mp.Bootstrap.TemplateRef)
		add(p.Child("infrastructure", "templateRef"), mp.Infrastructure.TemplateRef)
	}
	return out
}
