// Package patches applies a ClusterClass's inline patches to the templates
// of a Cluster's topology: selectors by apiVersion, kind and matchResources,
// enabledIf, and jsonPatches whose values are literal, taken from a variable
// (with a sub-path) or rendered from a Go template. Pure: no client, no I/O.
package patches

import (
	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/topology"
)

// Apply applies patches, in order, to the templates they select, changing
// each Template.Object in place. A patch with an external definition is not
// applied: it is reported in the error as unsupported (never skipped in
// silence). An error names the patch, the definition and the JSON patch.
func Apply(patches []clusterv1.ClusterClassPatch, templates []*topology.Template) error {
	panic("patches.Apply: not written yet")
}
