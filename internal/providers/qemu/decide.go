package qemu

import (
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	qemuv1 "capstan.dev/capstan/api/infrastructure/qemu/v1beta2"
)

// Guest ports the provider forwards to.
const (
	guestSSHPort       = 22
	guestAPIServerPort = 6443
)

// guestReserved are ports a guest listens on itself. The control-plane
// endpoint's port must be none of them: the guest reaches the endpoint at
// its own 127.0.0.1:<port> (a loopback forward to the host), which would
// clash with a guest service on the same port.
var guestReserved = []int{guestSSHPort, 2379, 2380, 2381, guestAPIServerPort, 10248, 10249, 10250, 10256, 10257, 10259}

// lbPortUsable tells whether port may be a control-plane endpoint port.
func lbPortUsable(port int) bool {
	return port > 0 && port <= 65535 && !slices.Contains(guestReserved, port)
}

// choosePorts keeps the ports a machine has and fills in those it lacks
// (ssh always, the API server's on control-plane machines) from
// candidates, in order, skipping any in taken (ports other machines and
// load balancers recorded) or already given. It fails when candidates run
// out; it never changes a port the machine has, since its VM may use it.
func choosePorts(have qemuv1.QEMUMachinePorts, controlPlane bool, candidates []int, taken map[int]bool) (qemuv1.QEMUMachinePorts, error) {
	out := have
	used := map[int]bool{int(have.SSH): true, int(have.APIServer): true}
	next := func() (int32, error) {
		for len(candidates) > 0 {
			c := candidates[0]
			candidates = candidates[1:]
			if c <= 0 || c > 65535 || taken[c] || used[c] {
				continue
			}
			used[c] = true
			return int32(c), nil
		}
		return 0, fmt.Errorf("no free host port left to forward into the VM")
	}
	var err error
	if out.SSH == 0 {
		if out.SSH, err = next(); err != nil {
			return have, err
		}
	}
	if controlPlane && out.APIServer == 0 {
		if out.APIServer, err = next(); err != nil {
			return have, err
		}
	}
	return out, nil
}

// portsNeeded tells how many new ports choosePorts will need.
func portsNeeded(have qemuv1.QEMUMachinePorts, controlPlane bool) int {
	n := 0
	if have.SSH == 0 {
		n++
	}
	if controlPlane && have.APIServer == 0 {
		n++
	}
	return n
}

// vmFacts is what a reconcile knows of a machine's VM, for vmVerdict.
type vmFacts struct {
	// Started: the VM was started once (it is never started again).
	Started bool
	// Running: its QEMU process lives; Status is QMP's run state.
	Running bool
	Status  string
	// Exited is the VM's own word on why it is gone, when known.
	Exited string
	// ConsoleLog is the file of the guest's serial console.
	ConsoleLog string
}

// verdict is the VMProvisioned condition and whether the machine is Ready.
type verdict struct {
	Status  metav1.ConditionStatus
	Reason  string
	Message string
}

// vmVerdict judges a started VM: provisioned while QEMU runs and the guest
// is not stopped; otherwise exited, for good.
func vmVerdict(f vmFacts) verdict {
	switch {
	case !f.Started:
		return verdict{metav1.ConditionFalse, qemuv1.StartingReason, "the VM has not been started yet"}
	case f.Running && (f.Status == "" || f.Status == "running"):
		return verdict{metav1.ConditionTrue, qemuv1.RunningReason, ""}
	case f.Running:
		// Paused, shut down but not yet quit, in an error state: QEMU
		// lives but the guest does not run.
		return verdict{metav1.ConditionFalse, qemuv1.VMExitedReason,
			fmt.Sprintf("QEMU runs but the guest is %q; see the guest's console log %s. A QEMU machine is not restarted: delete its Machine (a MachineHealthCheck does) to replace it", f.Status, f.ConsoleLog)}
	default:
		why := ""
		if f.Exited != "" {
			why = " (" + f.Exited + ")"
		}
		return verdict{metav1.ConditionFalse, qemuv1.VMExitedReason,
			fmt.Sprintf("the VM's QEMU process exited%s; see the guest's console log %s. A QEMU machine is not restarted: delete its Machine (a MachineHealthCheck does) to replace it", why, f.ConsoleLog)}
	}
}

// deletionStep is one step of deleting a QEMUMachine, in order.
type deletionStep string

const (
	// stepRemoveBackend: withdraw the machine from its cluster's load
	// balancer first, so that no new connection goes to a dying VM.
	stepRemoveBackend deletionStep = "RemoveBackend"
	// stepRemoveVM: stop QEMU and delete the VM's disk (vm.Remove).
	stepRemoveVM deletionStep = "RemoveVM"
	// stepRemoveDir: remove what is left of the machine's directory.
	stepRemoveDir deletionStep = "RemoveDir"
	// stepRemoveFinalizer: last, once nothing of the machine is left.
	stepRemoveFinalizer deletionStep = "RemoveFinalizer"
)

// deletionFacts is what deleting a QEMUMachine has to act on.
type deletionFacts struct {
	HasFinalizer bool
	// Backend: a load balancer backend file of the machine may exist.
	Backend bool
	// VMStarted: a VM was started from the machine's directory (its
	// marker is there), so the VM runtime has a process and disk to end.
	VMStarted bool
	// DirExists: the machine's directory is on disk.
	DirExists bool
}

// deletionSteps lists what deleting a QEMUMachine still has to do. The
// finalizer comes off only when nothing of the machine is left, so a crash
// in between repeats the steps rather than leaking a VM.
func deletionSteps(f deletionFacts) []deletionStep {
	if !f.HasFinalizer {
		return nil
	}
	var steps []deletionStep
	if f.Backend {
		steps = append(steps, stepRemoveBackend)
	}
	if f.VMStarted {
		steps = append(steps, stepRemoveVM)
	}
	if f.DirExists {
		steps = append(steps, stepRemoveDir)
	}
	return append(steps, stepRemoveFinalizer)
}
