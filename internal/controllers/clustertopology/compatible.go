package clustertopology

import (
	"fmt"
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"capstan.dev/capstan/internal/topology/desired"
)

// incompatible lists what a desired state would change that a topology
// cannot: the kind (or name) of the infrastructure cluster or control
// plane, the kind of a machine infrastructure template. Such a state comes
// from a rebase onto a class of other kinds; applying it would leave the
// running objects behind and make new ones beside them. Bootstrap templates
// may change kind, as upstream allows.
func incompatible(current desired.Current, st *desired.State) []string {
	var out []string
	strict := func(what string, cur, want *unstructured.Unstructured) {
		if cur == nil || want == nil {
			return
		}
		if gk, wgk := cur.GroupVersionKind().GroupKind(), want.GroupVersionKind().GroupKind(); gk != wgk {
			out = append(out, fmt.Sprintf("the %s would change from %s to %s", what, gk, wgk))
		} else if cur.GetName() != want.GetName() {
			out = append(out, fmt.Sprintf("the %s would change from %s %s to %s %s", what, gk.Kind, cur.GetName(), wgk.Kind, want.GetName()))
		}
	}
	sameKind := func(what string, cur, want *unstructured.Unstructured) {
		if cur == nil || want == nil {
			return
		}
		if gk, wgk := cur.GroupVersionKind().GroupKind(), want.GroupVersionKind().GroupKind(); gk != wgk {
			out = append(out, fmt.Sprintf("the %s would change from %s to %s", what, gk, wgk))
		}
	}
	strict("infrastructure cluster", current.InfrastructureCluster, st.InfrastructureCluster)
	strict("control plane", current.ControlPlane, st.ControlPlane)
	sameKind("control plane's machine infrastructure template", current.ControlPlaneMachineInfrastructure, st.ControlPlaneMachineInfrastructure)
	for _, name := range slices.Sorted(maps.Keys(st.MachineDeployments)) {
		if cur := current.MachineDeployments[name]; cur != nil {
			sameKind("infrastructure template of MachineDeployment topology "+name, cur.Infrastructure, st.MachineDeployments[name].Infrastructure)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(st.MachinePools)) {
		if cur := current.MachinePools[name]; cur != nil {
			sameKind("infrastructure machine pool of MachinePool topology "+name, cur.Infrastructure, st.MachinePools[name].Infrastructure)
		}
	}
	return out
}
