package local

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	localv1 "capstan.dev/capstan/api/infrastructure/local/v1beta2"
	"capstan.dev/capstan/internal/conditions"
	"capstan.dev/capstan/internal/kit"
	"capstan.dev/capstan/internal/pause"
	"capstan.dev/capstan/internal/providers/local/machinedir"
)

// How often to look again at a process that is starting or stopping; its
// lock watcher usually wakes the controller sooner.
const (
	startingRecheck = 250 * time.Millisecond
	stoppingRecheck = 250 * time.Millisecond
	// A process that does not hold its lock this long after its start has
	// failed to start.
	startTimeout = 10 * time.Second
)

type clusterReconciler struct {
	client  client.Client
	layout  layout
	lbs     *LBProcess
	notify  *notifier
	stopper *stopper
}

// clusterScope is what one reconcile of a LocalCluster knows.
type clusterScope struct {
	lc *localv1.LocalCluster
	// clusterName is the owning Cluster's name, from the owner reference;
	// cluster is nil until that Cluster exists.
	clusterName string
	cluster     *clusterv1.Cluster
}

func (r *clusterReconciler) scope(ctx context.Context, lc *localv1.LocalCluster) (*clusterScope, error) {
	s := &clusterScope{lc: lc, clusterName: kit.CoreOwnerName(lc, clusterv1.ClusterKind)}
	if s.clusterName != "" {
		var err error
		if s.cluster, err = kit.GetCluster(ctx, r.client, lc.Namespace, s.clusterName); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func (r *clusterReconciler) run(ctx context.Context, s *clusterScope) (ctrl.Result, error) {
	lc := s.lc
	if pause.Reconcile(s.cluster, lc) {
		return ctrl.Result{}, nil
	}
	if !lc.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, lc, s.clusterName)
	}
	if s.cluster == nil {
		msg := "waiting for the Cluster that references this LocalCluster to own it"
		if s.clusterName != "" {
			msg = fmt.Sprintf("Cluster %s does not exist", s.clusterName)
		}
		setNotReady(lc, localv1.WaitingForClusterReason, msg)
		return ctrl.Result{}, nil
	}

	// The finalizer and the chosen endpoint are written (by the kit, as
	// this reconcile ends) before anything exists on disk: a process must
	// never outlive the record of it.
	if !controllerutil.ContainsFinalizer(lc, localv1.LocalClusterFinalizer) || lc.Spec.ControlPlaneEndpoint.Port == 0 {
		controllerutil.AddFinalizer(lc, localv1.LocalClusterFinalizer)
		if lc.Spec.ControlPlaneEndpoint.Port == 0 {
			port, err := freePort()
			if err != nil {
				return ctrl.Result{}, fmt.Errorf("choosing a port for the control-plane endpoint: %w", err)
			}
			if lc.Spec.ControlPlaneEndpoint.Host == "" {
				lc.Spec.ControlPlaneEndpoint.Host = "127.0.0.1"
			}
			lc.Spec.ControlPlaneEndpoint.Port = port
		}
		// The update wakes this controller again.
		return ctrl.Result{}, nil
	}
	if h := lc.Spec.ControlPlaneEndpoint.Host; h != "127.0.0.1" && h != "localhost" {
		setNotReady(lc, "InvalidEndpoint", fmt.Sprintf("spec.controlPlaneEndpoint.host is %q, but the load balancer listens on 127.0.0.1 only: set host to 127.0.0.1 (or leave the endpoint empty) in a new LocalCluster", h))
		return ctrl.Result{}, nil
	}
	lc.Status.FailureDomains = nil
	if len(lc.Spec.FailureDomains) > 0 {
		lc.Status.FailureDomains = append([]clusterv1.FailureDomain(nil), lc.Spec.FailureDomains...)
	}
	return r.reconcileLoadBalancer(ctx, lc, s.clusterName)
}

func (r *clusterReconciler) reconcileLoadBalancer(ctx context.Context, lc *localv1.LocalCluster, clusterName string) (ctrl.Result, error) {
	dir := r.layout.lb(lc.Namespace, clusterName)
	lc.Status.LoadBalancer.Dir = dir
	st, err := r.lbs.EnsureRunning(ctrl.LoggerFrom(ctx), dir, machinedir.LBConfig{Port: lc.Spec.ControlPlaneEndpoint.Port, MachinesDir: r.layout.machines(lc.Namespace, clusterName)})
	if err != nil {
		setLB(lc, metav1.ConditionFalse, localv1.StartFailedReason, err.Error())
		return ctrl.Result{}, err
	}
	lc.Status.LoadBalancer.PID, lc.Status.LoadBalancer.Running = int32(st.PID), st.Running
	if st.Running {
		r.notify.watchLock(LBLockPath(dir), r.notify.clusters, client.ObjectKeyFromObject(lc), localClusterStub)
	}
	if !st.Listening {
		setLB(lc, metav1.ConditionFalse, st.Reason, st.Message)
		return ctrl.Result{RequeueAfter: st.Recheck}, nil
	}
	lc.Status.Initialization.Provisioned = ptr.To(true)
	setLB(lc, metav1.ConditionTrue, localv1.ReadyReason, "")
	return ctrl.Result{}, nil
}

func (r *clusterReconciler) reconcileDelete(ctx context.Context, lc *localv1.LocalCluster, clusterName string) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(lc, localv1.LocalClusterFinalizer) {
		return ctrl.Result{}, nil
	}
	dir := ""
	if clusterName != "" {
		dir = r.layout.cluster(lc.Namespace, clusterName)
	} else if lc.Status.LoadBalancer.Dir != "" {
		dir = filepath.Dir(lc.Status.LoadBalancer.Dir)
	}
	if dir != "" {
		done, err := r.stopAll(ctrl.LoggerFrom(ctx), dir)
		if err != nil {
			return ctrl.Result{}, err
		}
		if !done {
			conditions.Set(lc, metav1.Condition{Type: localv1.ReadyCondition, Status: metav1.ConditionFalse, Reason: localv1.DeletingReason, Message: "stopping the load balancer"})
			lc.Status.LoadBalancer.Running = false
			return ctrl.Result{RequeueAfter: stoppingRecheck}, nil
		}
		if err := os.RemoveAll(dir); err != nil {
			return ctrl.Result{}, fmt.Errorf("removing %s: %w", dir, err)
		}
		// The namespace directory goes with its last cluster.
		_ = os.Remove(filepath.Dir(dir))
		ctrl.LoggerFrom(ctx).Info("Removed the local cluster's directory", "dir", dir)
	}
	if dir != "" {
		r.lbs.Forget(filepath.Join(dir, "lb"))
	}
	// The object goes once the kit writes this.
	controllerutil.RemoveFinalizer(lc, localv1.LocalClusterFinalizer)
	return ctrl.Result{}, nil
}

// stopAll stops the cluster's load balancer and, should any still run,
// its machines (the core deletes Machines before the infrastructure
// cluster, so normally there are none).
func (r *clusterReconciler) stopAll(log logr.Logger, dir string) (bool, error) {
	locks, _ := filepath.Glob(filepath.Join(dir, "machines", "*", machinedir.LockFile))
	locks = append(locks, filepath.Join(dir, "lb", machinedir.LBLockFile))
	all := true
	for _, l := range locks {
		done, err := r.stopper.stop(log, l, 0)
		if err != nil {
			return false, err
		}
		all = all && done
	}
	for _, l := range locks {
		if filepath.Base(l) == machinedir.LockFile {
			r.notify.forgetMachine(filepath.Dir(l))
		}
	}
	return all, nil
}

func setLB(lc *localv1.LocalCluster, status metav1.ConditionStatus, reason, msg string) {
	conditions.Set(lc, metav1.Condition{Type: localv1.LoadBalancerReadyCondition, Status: status, Reason: reason, Message: msg})
	if status == metav1.ConditionTrue {
		conditions.Set(lc, metav1.Condition{Type: localv1.ReadyCondition, Status: status, Reason: localv1.ReadyReason})
		return
	}
	conditions.Set(lc, metav1.Condition{Type: localv1.ReadyCondition, Status: status, Reason: reason, Message: msg})
}

func setNotReady(obj conditions.Setter, reason, msg string) {
	conditions.Set(obj, metav1.Condition{Type: localv1.ReadyCondition, Status: metav1.ConditionFalse, Reason: reason, Message: msg})
}

// freePort asks the kernel for a loopback port nobody listens on.
func freePort() (int32, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return int32(l.Addr().(*net.TCPAddr).Port), nil
}

// alive tells whether a process with pid exists.
func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
