package patches

import (
	"strings"

	"k8s.io/utils/ptr"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/topology"
)

// selects reports whether a definition's selector picks a template: same
// apiVersion and kind, and a place in the class that matchResources names.
func selects(s clusterv1.PatchSelector, t *topology.Template) bool {
	if t.Object == nil || t.Object.GetAPIVersion() != s.APIVersion || t.Object.GetKind() != s.Kind {
		return false
	}
	m := s.MatchResources
	switch t.Role {
	case topology.InfrastructureCluster:
		return ptr.Deref(m.InfrastructureCluster, false)
	case topology.ControlPlane, topology.ControlPlaneMachineInfrastructure:
		// controlPlane covers the control plane's machine template too.
		return ptr.Deref(m.ControlPlane, false)
	case topology.MachineDeploymentBootstrap, topology.MachineDeploymentInfrastructure:
		return m.MachineDeploymentClass != nil && anyClassMatches(m.MachineDeploymentClass.Names, t.Class)
	case topology.MachinePoolBootstrap, topology.MachinePoolInfrastructure:
		return m.MachinePoolClass != nil && anyClassMatches(m.MachinePoolClass.Names, t.Class)
	}
	return false
}

// anyClassMatches reports whether one of a selector's class names picks the
// worker class: the name itself, "*", "prefix*" or "*suffix".
func anyClassMatches(names []string, class string) bool {
	for _, name := range names {
		switch {
		case name == "*" || name == class:
			return true
		case strings.HasPrefix(name, "*") && strings.HasSuffix(class, name[1:]):
			return true
		case strings.HasSuffix(name, "*") && strings.HasPrefix(class, name[:len(name)-1]):
			return true
		}
	}
	return false
}
