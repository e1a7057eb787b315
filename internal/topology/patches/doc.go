// Package patches applies a ClusterClass's inline patches to the templates
// of a Cluster's topology, with upstream Cluster API v1.14's semantics:
//
//   - a definition selects templates by apiVersion, kind and matchResources
//     (infrastructureCluster; controlPlane, which covers the control plane
//     template and its machine infrastructure template; machineDeploymentClass
//     and machinePoolClass by class name, "*", "prefix*" or "*suffix");
//   - enabledIf is a Go template over the template's variables; the patch
//     applies where it renders the value true;
//   - each jsonPatch (add, replace, remove under /spec) takes its value
//     literally, from a variable (with a sub-path such as "net.cidrs[0]") or
//     from a Go template with the hermetic sprig functions, parsed as YAML;
//   - patches apply in the class's order, each seeing the results of the
//     ones before it.
//
// External patches (Runtime SDK extensions) are not run by Capstan: Apply
// refuses a class that has one with an *UnsupportedError, so that the caller
// can say so in a condition rather than produce templates without them.
//
// ValidateClass gives an admission webhook the checks Apply makes before it
// changes anything, plus those that need the class (selectors that pick one
// of its templates, variables it defines, builtin variables that exist);
// Validate the ones that need the patches only.
//
// Pure: no client, no clock, no I/O.
package patches
