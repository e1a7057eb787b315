package desired

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/plan"
)

// ControlPlaneState is the control plane cp (nil when it does not exist) as
// the upgrade decision sees it. The admission webhook reads a control plane
// the same way, so that it refuses a new version exactly while the decision
// would still be busy with the previous one.
func ControlPlaneState(cp *unstructured.Unstructured) plan.ControlPlaneVersionState {
	return controlPlaneVersionState(cp)
}

// ExistingWorker is an existing MachineDeployment or MachinePool as the
// upgrade decision sees it: its name, its version and whether its Machines
// (counted by version in its status) are not all at that version yet.
func ExistingWorker(topologyName, objectName, version string, machines []clusterv1.StatusVersion) plan.WorkerVersionState {
	w := plan.WorkerVersionState{Name: topologyName}
	setCurrent(&w, objectName, version, machines)
	return w
}
