package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	localv1 "capstan.dev/capstan/api/infrastructure/local/v1beta2"
	"capstan.dev/capstan/internal/conditions"
	"capstan.dev/capstan/internal/kit"
	"capstan.dev/capstan/internal/lockfile"
	"capstan.dev/capstan/internal/pause"
	"capstan.dev/capstan/internal/providers/local/machinedir"
)

type machineReconciler struct {
	client  client.Client
	layout  layout
	binary  string
	notify  *notifier
	stopper *stopper

	mu     sync.Mutex
	starts map[types.NamespacedName]start
}

// machineScope is what one reconcile of a LocalMachine knows.
type machineScope struct {
	lm *localv1.LocalMachine
	// machine is the owning Machine, nil until it exists; clusterName is
	// its Cluster's (or, without a Machine, the cluster-name label's), and
	// cluster that Cluster, nil until it exists.
	machine     *clusterv1.Machine
	clusterName string
	cluster     *clusterv1.Cluster

	key types.NamespacedName
	dir string // the machine's directory
	// startedBefore: the process was started once already; a local machine
	// is never started twice.
	startedBefore bool
}

func (r *machineReconciler) scope(ctx context.Context, lm *localv1.LocalMachine) (*machineScope, error) {
	s := &machineScope{lm: lm, key: client.ObjectKeyFromObject(lm), clusterName: lm.Labels[clusterv1.ClusterNameLabel]}
	if name := kit.CoreOwnerName(lm, clusterv1.MachineKind); name != "" {
		m := &clusterv1.Machine{}
		switch err := r.client.Get(ctx, types.NamespacedName{Namespace: lm.Namespace, Name: name}, m); {
		case err == nil:
			s.machine, s.clusterName = m, m.Spec.ClusterName
		case !apierrors.IsNotFound(err):
			return nil, err
		}
	}
	if s.clusterName != "" {
		var err error
		if s.cluster, err = kit.GetCluster(ctx, r.client, lm.Namespace, s.clusterName); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func (r *machineReconciler) run(ctx context.Context, s *machineScope) (ctrl.Result, error) {
	lm := s.lm
	if pause.Reconcile(s.cluster, lm) {
		return ctrl.Result{}, nil
	}
	if !lm.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, lm, s.clusterName)
	}
	if s.machine == nil {
		setNotReady(lm, localv1.WaitingForMachineReason, "waiting for a Machine to own this LocalMachine")
		return ctrl.Result{}, nil
	}
	if s.cluster == nil {
		setNotReady(lm, localv1.WaitingForClusterReason, fmt.Sprintf("Cluster %q of Machine %s does not exist", s.machine.Spec.ClusterName, s.machine.Name))
		return ctrl.Result{}, nil
	}
	// The finalizer is on record (the kit writes it as this reconcile
	// ends) before a process exists.
	if controllerutil.AddFinalizer(lm, localv1.LocalMachineFinalizer) {
		return ctrl.Result{}, nil
	}
	s.dir = r.layout.machine(lm.Namespace, s.cluster.Name, lm.Name)
	s.startedBefore = ptr.Deref(lm.Status.Initialization.Provisioned, false) || exists(filepath.Join(s.dir, machinedir.LogFile))
	if !s.startedBefore {
		if ok, err := r.readyToStart(ctx, lm, s.machine, s.cluster); !ok || err != nil {
			pending(lm)
			return ctrl.Result{}, err
		}
	}
	place(s)
	if !s.startedBefore {
		if res, written, err := r.writeMachineDir(ctx, s); !written || err != nil {
			return res, err
		}
	}
	held, requeue, err := r.ensureProcess(ctx, s)
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := r.observe(ctx, s, held, requeue); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: requeue}, nil
}

// ProviderIDPrefix begins every local machine's provider ID,
// local://<namespace>/<LocalMachine name>.
const ProviderIDPrefix = "local://"

// place records where the machine is: its provider ID, failure domain and
// directory.
func place(s *machineScope) {
	lm := s.lm
	if lm.Spec.ProviderID == "" {
		lm.Spec.ProviderID = ProviderIDPrefix + lm.Namespace + "/" + lm.Name
	}
	failureDomain := s.machine.Spec.FailureDomain
	if failureDomain == "" {
		failureDomain = lm.Spec.FailureDomain
	}
	// The core reads spec.failureDomain (v1beta2); status keeps the older
	// place too.
	if lm.Spec.FailureDomain == "" {
		lm.Spec.FailureDomain = failureDomain
	}
	lm.Status.FailureDomain = failureDomain
	lm.Status.Process.Dir = s.dir
}

// writeMachineDir writes what the machine's first start needs into its
// directory: its description and bootstrap data. It tells whether it did;
// when not, lm says what is missing.
func (r *machineReconciler) writeMachineDir(ctx context.Context, s *machineScope) (ctrl.Result, bool, error) {
	lm, machine := s.lm, s.machine
	data, err := r.bootstrapData(ctx, lm, machine)
	if errors.Is(err, errSecretMissing) {
		pending(lm)
		return ctrl.Result{RequeueAfter: secretRecheck}, false, nil
	}
	if data == nil || err != nil {
		pending(lm)
		return ctrl.Result{}, false, err
	}
	_, controlPlane := machine.Labels[clusterv1.MachineControlPlaneLabel]
	cfg := machinedir.Machine{
		Namespace: lm.Namespace, Cluster: s.cluster.Name, Machine: machine.Name,
		Hostname: machine.Name, ProviderID: lm.Spec.ProviderID, Version: machine.Spec.Version,
		ControlPlane: controlPlane, FailureDomain: lm.Status.FailureDomain,
	}
	if err := machinedir.WriteMachine(s.dir, cfg, data); err != nil {
		return ctrl.Result{}, false, err
	}
	return ctrl.Result{}, true, nil
}

// ensureProcess starts the machine's process the first time, and tells
// whether it holds its lock now and how soon to look again.
func (r *machineReconciler) ensureProcess(ctx context.Context, s *machineScope) (bool, time.Duration, error) {
	lm, key, dir := s.lm, s.key, s.dir
	if err := r.notify.watchMachine(dir, key); err != nil {
		return false, 0, fmt.Errorf("watching %s: %w", dir, err)
	}
	held, err := r.running(key, dir)
	if err != nil {
		return false, 0, err
	}
	if !held && !s.startedBefore {
		pid, err := startDetached(r.binary, []string{"node", "run", "--dir", dir}, dir, filepath.Join(dir, machinedir.LogFile))
		if err != nil {
			setProcess(lm, metav1.ConditionFalse, localv1.StartFailedReason, err.Error())
			return false, 0, err
		}
		ctrl.LoggerFrom(ctx).Info("Started the machine", "pid", pid, "dir", dir)
		r.mu.Lock()
		r.starts[key] = start{pid: pid, at: time.Now()}
		r.mu.Unlock()
		lm.Status.Process.PID = int32(pid)
	}
	// Provisioned from the first start on, for good: a machine that dies
	// later shows in the conditions.
	lm.Status.Initialization.Provisioned = ptr.To(true)
	lm.Status.Addresses = clusterv1.MachineAddresses{
		{Type: "InternalIP", Address: "127.0.0.1"},
		{Type: "Hostname", Address: s.machine.Name},
		{Type: "InternalDNS", Address: s.machine.Name},
	}
	if !held && r.starting(key) {
		return false, startingRecheck, nil
	}
	return held, 0, nil
}

// observe reports the process and what the machine says of itself.
func (r *machineReconciler) observe(ctx context.Context, s *machineScope, held bool, starting time.Duration) error {
	lm, key, dir := s.lm, s.key, s.dir
	lockPath := filepath.Join(dir, machinedir.LockFile)
	node, err := machinedir.ReadStatus(dir)
	if err != nil {
		// Written atomically, so a bad file is the node's bug; report it
		// and carry on with what the lock says.
		ctrl.LoggerFrom(ctx).Error(err, "Reading the machine's status.json", "dir", dir)
		node = nil
	}
	p := &lm.Status.Process
	switch {
	case held:
		pid, err := lockfile.Owner(lockPath)
		if err != nil {
			return err
		}
		r.notify.watchLock(lockPath, r.notify.machines, key, localMachineStub)
		r.mu.Lock()
		delete(r.starts, key)
		r.mu.Unlock()
		p.PID = int32(pid)
		p.Phase, p.Message = localv1.LocalMachinePhaseBooting, "the machine's process runs and has not reported yet"
		if node != nil && node.Phase != "" {
			p.Phase, p.Message = localv1.LocalMachinePhase(node.Phase), node.Message
		}
		setProcess(lm, metav1.ConditionTrue, localv1.ProcessRunningReason, "")
	case starting > 0:
		p.Phase, p.Message = localv1.LocalMachinePhaseBooting, "the machine's process is starting"
		setProcess(lm, metav1.ConditionFalse, localv1.ProcessStartingReason, p.Message)
	default:
		last := ""
		if node != nil && node.Phase != "" {
			last = fmt.Sprintf(" (it last reported %s)", node.Phase)
			if node.Message != "" {
				last = fmt.Sprintf(" (it last reported %s: %s)", node.Phase, node.Message)
			}
		}
		p.PID = 0
		p.Phase = localv1.LocalMachinePhaseExited
		p.Message = fmt.Sprintf("the machine's process exited%s; see %s. A local machine is not restarted: delete its Machine (a MachineHealthCheck does) to replace it", last, filepath.Join(dir, machinedir.LogFile))
		setProcess(lm, metav1.ConditionFalse, localv1.ProcessExitedReason, p.Message)
	}
	if node != nil {
		if !node.Since.IsZero() {
			p.Since = metav1.NewTime(node.Since)
		}
		p.NodeName = node.NodeName
		// A machine that has not reached its bootstrap data reports none.
		bs := node.Bootstrap
		if bs == nil {
			bs = &machinedir.BootstrapStatus{}
		}
		p.BootstrapComplete, p.BootstrapSkipped, p.BootstrapFailed = bs.Complete, bs.Skipped, bs.Failed
	}
	setBootstrap(lm, node)
	setMachineReady(lm)
	return nil
}

// readyToStart tells whether everything a first start needs is there,
// saying on lm what is missing otherwise.
func (r *machineReconciler) readyToStart(ctx context.Context, lm *localv1.LocalMachine, machine *clusterv1.Machine, cluster *clusterv1.Cluster) (bool, error) {
	if machine.Spec.Bootstrap.DataSecretName == nil || *machine.Spec.Bootstrap.DataSecretName == "" {
		setNotReady(lm, localv1.WaitingForBootstrapReason, fmt.Sprintf("waiting for Machine %s's bootstrap data (spec.bootstrap.dataSecretName)", machine.Name))
		return false, nil
	}
	if ref := cluster.Spec.InfrastructureRef; isLocalRef(ref, "LocalCluster") {
		lc := &localv1.LocalCluster{}
		err := r.client.Get(ctx, types.NamespacedName{Namespace: lm.Namespace, Name: ref.Name}, lc)
		if err != nil && !apierrors.IsNotFound(err) {
			return false, err
		}
		if err != nil || !ptr.Deref(lc.Status.Initialization.Provisioned, false) {
			setNotReady(lm, localv1.WaitingForClusterReason, fmt.Sprintf("waiting for LocalCluster %s to be provisioned (its load balancer to listen)", ref.Name))
			return false, nil
		}
	}
	return true, nil
}

// bootstrapData reads the Machine's bootstrap Secret's value; nil without an
// error means it is not there yet (said on lm).
func (r *machineReconciler) bootstrapData(ctx context.Context, lm *localv1.LocalMachine, machine *clusterv1.Machine) ([]byte, error) {
	name := *machine.Spec.Bootstrap.DataSecretName
	s := &corev1.Secret{}
	if err := r.client.Get(ctx, types.NamespacedName{Namespace: lm.Namespace, Name: name}, s); err != nil {
		if apierrors.IsNotFound(err) {
			setNotReady(lm, localv1.WaitingForBootstrapReason, fmt.Sprintf("bootstrap data Secret %s does not exist yet", name))
			return nil, errSecretMissing
		}
		return nil, err
	}
	data, ok := s.Data["value"]
	if !ok {
		setNotReady(lm, localv1.WaitingForBootstrapReason, fmt.Sprintf("bootstrap data Secret %s has no key \"value\": the bootstrap provider writes the data there", name))
		return nil, nil
	}
	return data, nil
}

// errSecretMissing: the Machine names its bootstrap Secret but it does not
// exist yet. This controller does not watch Secrets (the manager caches those
// labelled with a cluster name and reads others live: internal/manager), so
// it looks again after secretRecheck.
var errSecretMissing = errors.New("bootstrap data Secret missing")

const secretRecheck = 2 * time.Second

// running tells whether the machine's process holds its lock. While a
// process this manager started may still be taking its lock, the test must
// not touch the lock (a shared test lock at that instant would make the
// process's own attempt fail): /proc/locks is read instead, and the usual
// test is used only once the process has written its status, which it does
// after locking.
func (r *machineReconciler) running(key types.NamespacedName, dir string) (bool, error) {
	lockPath := filepath.Join(dir, machinedir.LockFile)
	r.mu.Lock()
	s, started := r.starts[key]
	r.mu.Unlock()
	if started && time.Since(s.at) < startTimeout && alive(s.pid) {
		if pid, err := lockfile.Holder(lockPath); err != nil || pid > 0 {
			return pid > 0, err
		}
		if node, _ := machinedir.ReadStatus(dir); node == nil || node.PID != s.pid {
			return false, nil
		}
	}
	return lockfile.Held(lockPath)
}

// starting tells whether this manager started the machine's process
// moments ago and it may not have taken its lock yet.
func (r *machineReconciler) starting(key types.NamespacedName) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.starts[key]
	return ok && time.Since(s.at) < startTimeout && alive(s.pid)
}

func (r *machineReconciler) reconcileDelete(ctx context.Context, lm *localv1.LocalMachine, clusterName string) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(lm, localv1.LocalMachineFinalizer) {
		return ctrl.Result{}, nil
	}
	dir := lm.Status.Process.Dir
	if dir == "" && clusterName != "" {
		dir = r.layout.machine(lm.Namespace, clusterName, lm.Name)
	}
	if dir != "" {
		lastPID := 0
		if node, _ := machinedir.ReadStatus(dir); node != nil {
			lastPID = node.PID
		}
		done, err := r.stopper.stop(ctrl.LoggerFrom(ctx), filepath.Join(dir, machinedir.LockFile), lastPID)
		if err != nil {
			return ctrl.Result{}, err
		}
		if !done {
			lm.Status.Process.Message = "stopping the machine's process"
			conditions.Set(lm, metav1.Condition{Type: localv1.ReadyCondition, Status: metav1.ConditionFalse, Reason: localv1.DeletingReason, Message: "stopping the machine's process"})
			return ctrl.Result{RequeueAfter: stoppingRecheck}, nil
		}
		r.notify.forgetMachine(dir)
		if err := os.RemoveAll(dir); err != nil {
			return ctrl.Result{}, fmt.Errorf("removing %s: %w", dir, err)
		}
		ctrl.LoggerFrom(ctx).Info("Removed the machine's directory", "dir", dir)
	}
	r.mu.Lock()
	delete(r.starts, client.ObjectKeyFromObject(lm))
	r.mu.Unlock()
	// The object goes once the kit writes this.
	controllerutil.RemoveFinalizer(lm, localv1.LocalMachineFinalizer)
	return ctrl.Result{}, nil
}

// pending says on lm's process status why it has not been started yet.
func pending(lm *localv1.LocalMachine) {
	lm.Status.Process.Phase = localv1.LocalMachinePhasePending
	if c := conditions.Get(lm, localv1.ReadyCondition); c != nil {
		lm.Status.Process.Message = c.Message
	}
}

func setProcess(lm *localv1.LocalMachine, status metav1.ConditionStatus, reason, msg string) {
	conditions.Set(lm, metav1.Condition{Type: localv1.ProcessRunningCondition, Status: status, Reason: reason, Message: msg})
}

func setBootstrap(lm *localv1.LocalMachine, node *machinedir.Status) {
	c := metav1.Condition{Type: localv1.BootstrapSucceededCondition, Status: metav1.ConditionFalse, Reason: localv1.BootstrappingReason, Message: "the machine has not finished its bootstrap data"}
	switch {
	case node == nil || node.Bootstrap == nil:
	case node.Bootstrap.Failed != "":
		c.Reason, c.Message = localv1.BootstrapFailedReason, node.Bootstrap.Failed
	case node.Bootstrap.Complete:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, localv1.BootstrapSucceededReason, ""
		if n := len(node.Bootstrap.Skipped); n > 0 {
			c.Message = fmt.Sprintf("%d steps a local machine cannot perform were skipped (status.process.bootstrapSkipped)", n)
		}
	}
	conditions.Set(lm, c)
}

// setMachineReady: the infrastructure is ready while the process runs and
// does not report failure; bootstrap progress is the Machine's business.
func setMachineReady(lm *localv1.LocalMachine) {
	p := lm.Status.Process
	running := conditions.IsTrue(lm, localv1.ProcessRunningCondition)
	switch {
	case running && p.Phase == localv1.LocalMachinePhaseFailed:
		setNotReady(lm, localv1.ProcessFailedReason, p.Message)
	case running:
		conditions.Set(lm, metav1.Condition{Type: localv1.ReadyCondition, Status: metav1.ConditionTrue, Reason: localv1.ReadyReason})
	default:
		c := conditions.Get(lm, localv1.ProcessRunningCondition)
		setNotReady(lm, c.Reason, c.Message)
	}
}
