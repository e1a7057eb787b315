package qemu

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

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

// controlPlaneVMOf is what a worker needs of the control-plane machine m.
func controlPlaneVMOf(m *qemuv1.QEMUMachine) controlPlaneVM {
	cp := controlPlaneVM{
		Name:    m.Name,
		Started: ptr.Deref(m.Status.Initialization.Provisioned, false),
		Running: conditions.IsTrue(m, qemuv1.VMProvisionedCondition),
	}
	if c := conditions.Get(m, qemuv1.BootstrapSucceededCondition); c != nil {
		cp.Bootstrap = c.Status
	}
	return cp
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
		out = append(out, controlPlaneVMOf(&list.Items[i]))
	}
	return out, nil
}

// waitForControlPlane tells whether a worker must wait before starting its
// VM, and says so on it. A change of the control-plane machine brings the
// waiting workers back (workersWaitingFor).
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

// workersWaitingFor maps a change of a control-plane QEMUMachine that no
// longer bootstraps (its bootstrap ended or its VM stopped) to the workers
// of its cluster waiting to start. It runs on the watch's event, once the
// cache holds the change, so that the workers read the control plane as it
// is now: woken from the control plane's own reconcile, before its status
// was written, a worker read the old status and waited on with nothing to
// wake it again.
func (r *machineReconciler) workersWaitingFor(ctx context.Context, obj client.Object) []reconcile.Request {
	cp, ok := obj.(*qemuv1.QEMUMachine)
	if !ok {
		return nil
	}
	cluster := cp.Labels[clusterv1.ClusterNameLabel]
	if _, isCP := cp.Labels[clusterv1.MachineControlPlaneLabel]; !isCP || cluster == "" {
		return nil
	}
	if bootstrappingControlPlane([]controlPlaneVM{controlPlaneVMOf(cp)}) != "" {
		return nil
	}
	list := &qemuv1.QEMUMachineList{}
	if err := r.client.List(ctx, list, client.InNamespace(cp.Namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: cluster}); err != nil {
		log.FromContext(ctx).Error(err, "Listing the workers that wait for a control plane", "controlPlane", cp.Name)
		return nil
	}
	return waitingWorkers(list.Items)
}

// waitingWorkers are the requests for the machines whose VM waits for a
// control plane's bootstrap.
func waitingWorkers(machines []qemuv1.QEMUMachine) []reconcile.Request {
	var out []reconcile.Request
	for i := range machines {
		m := &machines[i]
		if c := conditions.Get(m, qemuv1.VMProvisionedCondition); c != nil && c.Reason == qemuv1.WaitingForControlPlaneReason {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(m)})
		}
	}
	return out
}
