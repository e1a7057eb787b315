package desired

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"capstan.dev/capstan/internal/contract"
	"capstan.dev/capstan/internal/names"
	"capstan.dev/capstan/internal/ssa"
)

// rotate gives each cloned template whose desired content differs from its
// current copy a new name: a template in use is never changed in place (the
// Machines made from it would silently disagree with it); a new one makes
// the MachineDeployment or control plane roll to it. Equal content keeps the
// current name. Metadata does not count: it is updated in place.
func rotate(in Input, bp *blueprint, n *objectNames) {
	prefix := in.Cluster.Name + "-"
	if bp.controlPlaneMachineInfrastructure != nil {
		if current := in.Current.ControlPlaneMachineInfrastructure; current != nil && current.GetName() == n.controlPlaneMachineInfrastructure {
			desired := templateFromTemplate(in, bp.controlPlaneMachineInfrastructure, n.controlPlaneMachineInfrastructure, nil)
			if templateChanged(desired, current, in.FieldManager) {
				n.controlPlaneMachineInfrastructure = names.WithPrefix(prefix, in.Random)
			}
		}
	}
	for _, md := range bp.machineDeployments {
		current := in.Current.MachineDeployments[md.topology.Name]
		if current == nil {
			continue
		}
		w := n.machineDeployments[md.topology.Name]
		prefix := in.Cluster.Name + "-" + md.topology.Name + "-"
		for _, t := range []struct {
			class, current *unstructured.Unstructured
			name           *string
		}{
			{md.bootstrap, current.Bootstrap, &w.bootstrap},
			{md.infrastructure, current.Infrastructure, &w.infrastructure},
		} {
			if t.current == nil || t.current.GetName() != *t.name {
				continue
			}
			if templateChanged(templateFromTemplate(in, t.class, *t.name, nil), t.current, in.FieldManager) {
				*t.name = names.WithPrefix(prefix, in.Random)
			}
		}
	}
}

// templateChanged tells whether a template's desired content differs from
// its current copy: another kind, a spec field it sets that the current
// lacks or holds another value, or (with the topology's field manager) a
// spec field the topology applied before that it no longer sets. Fields
// only the current has, that nobody applied (the API server's defaults),
// do not count.
func templateChanged(desired, current *unstructured.Unstructured, manager string) bool {
	if desired.GroupVersionKind().GroupKind() != current.GroupVersionKind().GroupKind() {
		return true
	}
	var owned []map[string]any
	if manager != "" {
		owned = contract.FieldsAppliedBy(current, manager)
	}
	return ssa.Change(desired.Object, current.Object, owned, "spec") != ""
}
