package qemu

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	qemuv1 "capstan.dev/capstan/api/infrastructure/qemu/v1beta2"
	"capstan.dev/capstan/internal/conditions"
	"capstan.dev/capstan/internal/kit"
	"capstan.dev/capstan/internal/pause"
	"capstan.dev/capstan/internal/providers/local"
	"capstan.dev/capstan/internal/providers/local/machinedir"
)

type clusterReconciler struct {
	client client.Client
	layout layout
	lbs    *local.LBProcess
	notify *notifier
}

// clusterScope is what one reconcile of a QEMUCluster knows.
type clusterScope struct {
	qc *qemuv1.QEMUCluster
	// clusterName is the owning Cluster's name, from the owner reference;
	// cluster is nil until that Cluster exists.
	clusterName string
	cluster     *clusterv1.Cluster
}

func (r *clusterReconciler) scope(ctx context.Context, qc *qemuv1.QEMUCluster) (*clusterScope, error) {
	s := &clusterScope{qc: qc, clusterName: kit.CoreOwnerName(qc, clusterv1.ClusterKind)}
	if s.clusterName != "" {
		var err error
		if s.cluster, err = kit.GetCluster(ctx, r.client, qc.Namespace, s.clusterName); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func (r *clusterReconciler) run(ctx context.Context, s *clusterScope) (ctrl.Result, error) {
	qc := s.qc
	if pause.Reconcile(s.cluster, qc) {
		return ctrl.Result{}, nil
	}
	if !qc.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, qc)
	}
	if s.cluster == nil {
		msg := "waiting for the Cluster that references this QEMUCluster to own it"
		if s.clusterName != "" {
			msg = fmt.Sprintf("Cluster %s does not exist", s.clusterName)
		}
		setNotReady(qc, qemuv1.WaitingForClusterReason, msg)
		return ctrl.Result{}, nil
	}
	// The finalizer and the endpoint are on record (the kit writes them
	// as this reconcile ends) before a process exists.
	if !controllerutil.ContainsFinalizer(qc, qemuv1.QEMUClusterFinalizer) || qc.Spec.ControlPlaneEndpoint.Port == 0 {
		controllerutil.AddFinalizer(qc, qemuv1.QEMUClusterFinalizer)
		if qc.Spec.ControlPlaneEndpoint.Port == 0 {
			port, err := freeLBPort()
			if err != nil {
				return ctrl.Result{}, fmt.Errorf("choosing a port for the control-plane endpoint: %w", err)
			}
			qc.Spec.ControlPlaneEndpoint.Host, qc.Spec.ControlPlaneEndpoint.Port = "127.0.0.1", port
		}
		return ctrl.Result{}, nil
	}
	if !lbPortUsable(int(qc.Spec.ControlPlaneEndpoint.Port)) {
		setLB(qc, metav1.ConditionFalse, qemuv1.InvalidEndpointReason, fmt.Sprintf(
			"spec.controlPlaneEndpoint.port %d is a port the guests use themselves (%v): create a new QEMUCluster with another port, or none to let the provider choose",
			qc.Spec.ControlPlaneEndpoint.Port, guestReserved))
		return ctrl.Result{}, nil
	}
	if _, err := clusterNetworks(s.cluster.Spec.ClusterNetwork.Pods.CIDRBlocks, s.cluster.Spec.ClusterNetwork.Services.CIDRBlocks); err != nil {
		setLB(qc, metav1.ConditionFalse, qemuv1.InvalidNetworkReason, fmt.Sprintf("Cluster %s: %v", s.cluster.Name, err))
		return ctrl.Result{}, nil
	}
	qc.Status.FailureDomains = nil
	if len(qc.Spec.FailureDomains) > 0 {
		qc.Status.FailureDomains = append([]clusterv1.FailureDomain(nil), qc.Spec.FailureDomains...)
	}
	dir := r.layout.lb(qc.Namespace, s.clusterName)
	qc.Status.LoadBalancer.Dir = dir
	root, err := socketRoot()
	if err != nil {
		setLB(qc, metav1.ConditionFalse, qemuv1.StartFailedReason, fmt.Sprintf("the directory of the VMs' network sockets: %v", err))
		return ctrl.Result{}, err
	}
	netDir := networkDir(root, dir)
	if err := machinedir.PrivateDir(netDir); err != nil {
		return ctrl.Result{}, err
	}
	st, err := r.lbs.EnsureRunning(ctrl.LoggerFrom(ctx), dir, machinedir.LBConfig{
		Port:        qc.Spec.ControlPlaneEndpoint.Port,
		MachinesDir: r.layout.backends(qc.Namespace, s.clusterName),
		// An emulated API server is slow to answer and a check is a TLS
		// handshake: check seldom, wait long.
		CheckIntervalMillis: 2000,
		CheckTimeoutMillis:  5000,
		SwitchSocket:        switchSocket(netDir),
	})
	if err != nil {
		setLB(qc, metav1.ConditionFalse, qemuv1.StartFailedReason, err.Error())
		return ctrl.Result{}, err
	}
	qc.Status.LoadBalancer.PID, qc.Status.LoadBalancer.Running = int32(st.PID), st.Running
	if st.Running {
		r.notify.watchLB(local.LBLockPath(dir), client.ObjectKeyFromObject(qc))
	}
	if !st.Listening {
		setLB(qc, metav1.ConditionFalse, st.Reason, st.Message)
		return ctrl.Result{RequeueAfter: st.Recheck}, nil
	}
	qc.Status.Initialization.Provisioned = ptr.To(true)
	setLB(qc, metav1.ConditionTrue, qemuv1.ReadyReason, "")
	return ctrl.Result{}, nil
}

// reconcileDelete stops the load balancer and removes its directory. The
// core deletes the Cluster's Machines (and so the VMs) before this object.
func (r *clusterReconciler) reconcileDelete(ctx context.Context, qc *qemuv1.QEMUCluster) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(qc, qemuv1.QEMUClusterFinalizer) {
		return ctrl.Result{}, nil
	}
	if dir := qc.Status.LoadBalancer.Dir; dir != "" {
		done, err := r.lbs.Stop(ctrl.LoggerFrom(ctx), dir)
		if err != nil {
			return ctrl.Result{}, err
		}
		if !done {
			setLB(qc, metav1.ConditionFalse, qemuv1.DeletingReason, "stopping the load balancer")
			qc.Status.LoadBalancer.Running = false
			return ctrl.Result{RequeueAfter: stoppingRecheck}, nil
		}
		if root, err := socketRoot(); err == nil {
			if err := os.RemoveAll(networkDir(root, dir)); err != nil {
				return ctrl.Result{}, fmt.Errorf("removing the network sockets' directory: %w", err)
			}
		}
		if err := os.RemoveAll(dir); err != nil {
			return ctrl.Result{}, fmt.Errorf("removing %s: %w", dir, err)
		}
		// The namespace's directory goes with its last load balancer.
		_ = os.Remove(filepath.Dir(dir))
		ctrl.LoggerFrom(ctx).Info("Removed the load balancer's directory", "dir", dir)
	}
	controllerutil.RemoveFinalizer(qc, qemuv1.QEMUClusterFinalizer)
	return ctrl.Result{}, nil
}

func setLB(qc *qemuv1.QEMUCluster, status metav1.ConditionStatus, reason, msg string) {
	conditions.Set(qc, metav1.Condition{Type: qemuv1.LoadBalancerReadyCondition, Status: status, Reason: reason, Message: msg})
	conditions.Set(qc, metav1.Condition{Type: qemuv1.ReadyCondition, Status: status, Reason: reason, Message: msg})
}

func setNotReady(obj conditions.Setter, reason, msg string) {
	conditions.Set(obj, metav1.Condition{Type: qemuv1.ReadyCondition, Status: metav1.ConditionFalse, Reason: reason, Message: msg})
}

// freeLBPort asks the kernel for a free loopback port that no guest uses
// itself.
func freeLBPort() (int32, error) {
	for range 20 {
		ports, err := freePorts(1)
		if err != nil {
			return 0, err
		}
		if lbPortUsable(ports[0]) {
			return int32(ports[0]), nil
		}
	}
	return 0, fmt.Errorf("the kernel kept offering ports the guests use")
}

// freePorts asks the kernel for n distinct loopback ports nobody listens
// on, holding each until all are chosen so that none repeats.
func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
