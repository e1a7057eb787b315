package qemu

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	qemuv1 "capstan.dev/capstan/api/infrastructure/qemu/v1beta2"
	"capstan.dev/capstan/internal/conditions"
)

// controlPlaneVM is what a worker needs to know of a control-plane machine
// of its cluster before it starts its own VM.
type controlPlaneVM struct {
	Name string
	// Started: its VM was started; Running: it still runs.
	Started, Running bool
	// Bootstrap is its BootstrapSucceeded condition's status, "" before
	// the provider set one.
	Bootstrap metav1.ConditionStatus
}

// bootstrappingControlPlane names a control-plane machine whose VM runs and
// has not reported the end of its bootstrap, "" when there is none. A
// worker waits for it: under software emulation a second VM booting beside
// `kubeadm init` takes the cores the control plane needs to finish in
// kubeadm's time limits, and the worker could not join before the control
// plane's last phase anyway.
func bootstrappingControlPlane(cps []controlPlaneVM) string {
	for _, cp := range cps {
		ended := cp.Bootstrap == metav1.ConditionTrue || cp.Bootstrap == metav1.ConditionFalse
		if cp.Started && cp.Running && !ended {
			return cp.Name
		}
	}
	return ""
}

// clusterControlPlaneVMs reads the control-plane QEMUMachines of s's
// cluster (the control plane labels its infrastructure machines).
func (r *machineReconciler) clusterControlPlaneVMs(ctx context.Context, s *machineScope) ([]controlPlaneVM, error) {
	list := &qemuv1.QEMUMachineList{}
	if err := r.client.List(ctx, list, client.InNamespace(s.qm.Namespace),
		client.MatchingLabels{clusterv1.ClusterNameLabel: s.clusterName}, client.HasLabels{clusterv1.MachineControlPlaneLabel}); err != nil {
		return nil, err
	}
	var out []controlPlaneVM
	for i := range list.Items {
		m := &list.Items[i]
		cp := controlPlaneVM{
			Name:    m.Name,
			Started: ptr.Deref(m.Status.Initialization.Provisioned, false),
			Running: conditions.IsTrue(m, qemuv1.VMProvisionedCondition),
		}
		if c := conditions.Get(m, qemuv1.BootstrapSucceededCondition); c != nil {
			cp.Bootstrap = c.Status
		}
		out = append(out, cp)
	}
	return out, nil
}

// waitForControlPlane tells whether a worker must wait before starting its
// VM, and says so on it. The control-plane machine wakes the waiting
// workers when its bootstrap ends (wakeWaitingWorkers).
func (r *machineReconciler) waitForControlPlane(ctx context.Context, s *machineScope) (bool, error) {
	if s.controlPlane {
		return false, nil
	}
	cps, err := r.clusterControlPlaneVMs(ctx, s)
	if err != nil {
		return false, err
	}
	if name := bootstrappingControlPlane(cps); name != "" {
		setVM(s.qm, metav1.ConditionFalse, qemuv1.WaitingForControlPlaneReason, fmt.Sprintf(
			"waiting for control-plane machine %s to finish its bootstrap before starting this VM", name))
		return true, nil
	}
	return false, nil
}

// wakeWaitingWorkers wakes the workers of s's cluster that wait for a
// control plane's bootstrap, once a control-plane machine's bootstrap has
// ended or its VM stopped.
func (r *machineReconciler) wakeWaitingWorkers(ctx context.Context, s *machineScope) error {
	list := &qemuv1.QEMUMachineList{}
	if err := r.client.List(ctx, list, client.InNamespace(s.qm.Namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: s.clusterName}); err != nil {
		return err
	}
	for i := range list.Items {
		m := &list.Items[i]
		if c := conditions.Get(m, qemuv1.VMProvisionedCondition); c != nil && c.Reason == qemuv1.WaitingForControlPlaneReason {
			r.notify.machine(client.ObjectKeyFromObject(m))
		}
	}
	return nil
}
