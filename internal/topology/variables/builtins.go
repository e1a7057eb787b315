package variables

// BuiltinsName is the variable that holds the builtin variables.
const BuiltinsName = "builtin"

// Builtins are the builtin variables (builtin.cluster.*, builtin.controlPlane.*,
// builtin.machineDeployment.*, builtin.machinePool.*) with upstream's JSON
// names; a template sees cluster always, controlPlane in the control plane's
// templates, machineDeployment or machinePool in a worker's.
type Builtins struct {
	// Filled in by whoever writes this package: one struct per scope with
	// the JSON names the Cluster API book lists.
}
