package qemu

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
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
	qemuv1 "capstan.dev/capstan/api/infrastructure/qemu/v1beta2"
	"capstan.dev/capstan/internal/conditions"
	"capstan.dev/capstan/internal/kit"
	"capstan.dev/capstan/internal/pause"
	"capstan.dev/capstan/internal/providers/local"
	"capstan.dev/capstan/internal/providers/qemu/vm"
)

// How soon to look again at what no watch reports.
const (
	// secretRecheck: the bootstrap Secret is named but not there yet. The
	// manager does not watch Secrets the provider reads (see the local
	// provider, which does the same).
	secretRecheck = 2 * time.Second
	// stoppingRecheck: a load balancer that is stopping.
	stoppingRecheck = 250 * time.Millisecond
)

type machineReconciler struct {
	client client.Client
	layout layout
	notify *notifier
	images *images
	hosts  *hostReservations
}

// machineScope is what one reconcile of a QEMUMachine knows.
type machineScope struct {
	qm *qemuv1.QEMUMachine
	// machine is the owning Machine, nil until it exists; clusterName is
	// its Cluster's (or, without a Machine, the cluster-name label's), and
	// cluster that Cluster, nil until it exists.
	machine     *clusterv1.Machine
	clusterName string
	cluster     *clusterv1.Cluster

	key          types.NamespacedName
	dir          string
	controlPlane bool
}

func (r *machineReconciler) scope(ctx context.Context, qm *qemuv1.QEMUMachine) (*machineScope, error) {
	s := &machineScope{qm: qm, key: client.ObjectKeyFromObject(qm), clusterName: qm.Labels[clusterv1.ClusterNameLabel]}
	if name := kit.CoreOwnerName(qm, clusterv1.MachineKind); name != "" {
		m := &clusterv1.Machine{}
		switch err := r.client.Get(ctx, types.NamespacedName{Namespace: qm.Namespace, Name: name}, m); {
		case err == nil:
			s.machine, s.clusterName = m, m.Spec.ClusterName
			_, s.controlPlane = m.Labels[clusterv1.MachineControlPlaneLabel]
		case !apierrors.IsNotFound(err):
			return nil, err
		}
	}
	if s.clusterName != "" {
		var err error
		if s.cluster, err = kit.GetCluster(ctx, r.client, qm.Namespace, s.clusterName); err != nil {
			return nil, err
		}
	}
	s.dir = r.layout.machine(qm.Namespace, qm.Name)
	return s, nil
}

func (r *machineReconciler) run(ctx context.Context, s *machineScope) (ctrl.Result, error) {
	qm := s.qm
	if pause.Reconcile(s.cluster, qm) {
		return ctrl.Result{}, nil
	}
	if !qm.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, s)
	}
	if s.machine == nil {
		setNotReady(qm, qemuv1.WaitingForMachineReason, "waiting for a Machine to own this QEMUMachine")
		return ctrl.Result{}, nil
	}
	if s.cluster == nil {
		setNotReady(qm, qemuv1.WaitingForClusterReason, fmt.Sprintf("Cluster %q of Machine %s does not exist", s.machine.Spec.ClusterName, s.machine.Name))
		return ctrl.Result{}, nil
	}
	// The finalizer is on record (the kit writes it as this reconcile
	// ends) before anything exists on disk.
	if controllerutil.AddFinalizer(qm, qemuv1.QEMUMachineFinalizer) {
		return ctrl.Result{}, nil
	}
	place(s)
	started := ptr.Deref(qm.Status.Initialization.Provisioned, false) || exists(filepath.Join(s.dir, startedMarker))
	if !started {
		qc, res, err := r.provisionedCluster(ctx, s)
		if qc == nil || err != nil {
			return res, err
		}
		if res, ok, err := r.start(ctx, s, qc); !ok || err != nil {
			return res, err
		}
	}
	return r.observe(ctx, s)
}

// place records where the machine is: its provider ID, failure domain and
// directory. The provider ID is qemu://<namespace>/<name>: unique among
// the management cluster's machines and known before the VM exists, so it
// can go into the VM's meta-data, from which the kubelet takes it.
func place(s *machineScope) {
	qm := s.qm
	if qm.Spec.ProviderID == "" {
		qm.Spec.ProviderID = qemuv1.ProviderIDPrefix + qm.Namespace + "/" + qm.Name
	}
	failureDomain := s.machine.Spec.FailureDomain
	if failureDomain == "" {
		failureDomain = qm.Spec.FailureDomain
	}
	if qm.Spec.FailureDomain == "" {
		qm.Spec.FailureDomain = failureDomain
	}
	qm.Status.FailureDomain = failureDomain
	qm.Status.VM.Dir = s.dir
}

// provisionedCluster returns the machine's QEMUCluster once its load
// balancer listens; nil (with qm saying why) before.
func (r *machineReconciler) provisionedCluster(ctx context.Context, s *machineScope) (*qemuv1.QEMUCluster, ctrl.Result, error) {
	ref := s.cluster.Spec.InfrastructureRef
	if !isQEMURef(ref, "QEMUCluster") {
		setVM(s.qm, metav1.ConditionFalse, qemuv1.WaitingForClusterReason, fmt.Sprintf(
			"Cluster %s's infrastructure is %s %s, not a QEMUCluster: a QEMUMachine needs the load balancer of a QEMUCluster", s.cluster.Name, ref.Kind, ref.Name))
		return nil, ctrl.Result{}, nil
	}
	qc := &qemuv1.QEMUCluster{}
	err := r.client.Get(ctx, types.NamespacedName{Namespace: s.qm.Namespace, Name: ref.Name}, qc)
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, ctrl.Result{}, err
	}
	if err != nil || !ptr.Deref(qc.Status.Initialization.Provisioned, false) || qc.Spec.ControlPlaneEndpoint.Port == 0 {
		setVM(s.qm, metav1.ConditionFalse, qemuv1.WaitingForClusterReason, fmt.Sprintf("waiting for QEMUCluster %s to be provisioned (its load balancer to listen)", ref.Name))
		return nil, ctrl.Result{}, nil
	}
	return qc, ctrl.Result{}, nil
}

// start takes the steps to the VM's one start, each reconcile as far as it
// can: bootstrap data, ports (on record before QEMU binds them), image,
// then vm.Start. ok tells whether the VM was started.
func (r *machineReconciler) start(ctx context.Context, s *machineScope, qc *qemuv1.QEMUCluster) (ctrl.Result, bool, error) {
	qm, machine := s.qm, s.machine
	data, res, err := r.bootstrapData(ctx, s)
	if data == nil || err != nil {
		return res, false, err
	}
	if userDataBootcmd(data) {
		setVM(qm, metav1.ConditionFalse, qemuv1.StartFailedReason, fmt.Sprintf(
			"the bootstrap data of Machine %s sets bootcmd (the KubeadmConfig's spec.bootCommands), which would replace the commands that set up a QEMU node's network: move them to spec.preKubeadmCommands", machine.Name))
		return ctrl.Result{}, false, nil
	}
	version := machine.Spec.Version
	if version == "" {
		setVM(qm, metav1.ConditionFalse, qemuv1.StartFailedReason, fmt.Sprintf("Machine %s has no spec.version: a QEMU machine boots the node image of its Kubernetes version", machine.Name))
		return ctrl.Result{}, false, nil
	}
	podCIDR, err := clusterNetworks(s.cluster.Spec.ClusterNetwork.Pods.CIDRBlocks, s.cluster.Spec.ClusterNetwork.Services.CIDRBlocks)
	if err != nil {
		setVM(qm, metav1.ConditionFalse, qemuv1.InvalidNetworkReason, fmt.Sprintf("Cluster %s: %v", s.cluster.Name, err))
		return ctrl.Result{}, false, nil
	}
	if portsNeeded(qm.Status.Ports, s.controlPlane) > 0 {
		return ctrl.Result{}, false, r.choosePorts(ctx, s)
	}
	host := hostOf(qm.Status.NetworkAddress)
	if host == 0 {
		return ctrl.Result{}, false, r.chooseAddress(ctx, s)
	}
	img, step, err := r.images.get(version, s.key)
	if err != nil {
		setVM(qm, metav1.ConditionFalse, qemuv1.ImageFailedReason, fmt.Sprintf("building the guest image failed: %v", err))
		return ctrl.Result{RequeueAfter: imageRetry}, false, nil
	}
	if img == nil {
		// The build wakes this machine at each step and at its end.
		setVM(qm, metav1.ConditionFalse, qemuv1.BuildingImageReason, "building the node image of Kubernetes "+version+": "+step)
		return ctrl.Result{}, false, nil
	}
	if wait, err := r.waitForControlPlane(ctx, s); wait || err != nil {
		return ctrl.Result{}, false, err
	}
	root, err := socketRoot()
	if err != nil {
		return ctrl.Result{}, false, fmt.Errorf("the directory of the VMs' network sockets: %w", err)
	}
	netDir := networkDir(root, r.layout.lb(qm.Namespace, s.cluster.Name))
	segment := &vm.Segment{Switch: switchSocket(netDir), Socket: vmSocket(netDir, host), MAC: macOf(host), Address: qm.Status.NetworkAddress + "/24"}
	// A socket left by a VM of the same address that is gone would keep
	// QEMU from binding it.
	if err := os.Remove(segment.Socket); err != nil && !os.IsNotExist(err) {
		return ctrl.Result{}, false, err
	}
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return ctrl.Result{}, false, err
	}
	marker := filepath.Join(s.dir, startedMarker)
	if err := os.WriteFile(marker, []byte(qm.Spec.ProviderID+"\n"), 0o600); err != nil {
		return ctrl.Result{}, false, err
	}
	spec := vm.Spec{
		Dir: s.dir, Image: *img,
		Hostname: machine.Name, InstanceID: string(qm.UID),
		MetaData: map[string]string{"provider-id": qm.Spec.ProviderID},
		UserData: data,
		// The guest reaches the control-plane endpoint (the load balancer
		// on the host's loopback) at the address the kubeconfigs name.
		VendorData: nodeVendorData(int(qc.Spec.ControlPlaneEndpoint.Port), host, podCIDR),
		CPUs:       int(orDefault(qm.Spec.CPUs, qemuv1.DefaultCPUs)),
		MemoryMiB:  int(orDefault(qm.Spec.MemoryMiB, qemuv1.DefaultMemoryMiB)),
		Forwards:   forwards(qm.Status.Ports),
		Segment:    segment,
	}
	if err := vm.Start(ctx, spec); err != nil {
		// Not started: the next attempt may start it.
		_ = os.Remove(marker)
		setVM(qm, metav1.ConditionFalse, qemuv1.StartFailedReason, fmt.Sprintf("starting the VM: %v", err))
		return ctrl.Result{}, false, err
	}
	ctrl.LoggerFrom(ctx).Info("Started the VM", "dir", s.dir, "image", img.ID, "address", qm.Status.NetworkAddress, "ssh", qm.Status.Ports.SSH, "apiServer", qm.Status.Ports.APIServer)
	// Provisioned from the first start on, for good: a VM that dies later
	// shows in the conditions.
	qm.Status.Initialization.Provisioned = ptr.To(true)
	qm.Status.VM.Image = img.ID
	return ctrl.Result{}, true, nil
}

func orDefault(v, def int32) int32 {
	if v <= 0 {
		return def
	}
	return v
}

func forwards(p qemuv1.QEMUMachinePorts) []vm.Forward {
	f := []vm.Forward{{HostPort: int(p.SSH), GuestPort: guestSSHPort}}
	if p.APIServer != 0 {
		f = append(f, vm.Forward{HostPort: int(p.APIServer), GuestPort: guestAPIServerPort})
	}
	return f
}

// bootstrapData reads the Machine's bootstrap data; nil data means it is
// not there yet (said on qm).
func (r *machineReconciler) bootstrapData(ctx context.Context, s *machineScope) ([]byte, ctrl.Result, error) {
	qm, machine := s.qm, s.machine
	name := ptr.Deref(machine.Spec.Bootstrap.DataSecretName, "")
	if name == "" {
		setVM(qm, metav1.ConditionFalse, qemuv1.WaitingForBootstrapReason, fmt.Sprintf("waiting for Machine %s's bootstrap data (spec.bootstrap.dataSecretName)", machine.Name))
		return nil, ctrl.Result{}, nil
	}
	secret := &corev1.Secret{}
	if err := r.client.Get(ctx, types.NamespacedName{Namespace: qm.Namespace, Name: name}, secret); err != nil {
		if apierrors.IsNotFound(err) {
			setVM(qm, metav1.ConditionFalse, qemuv1.WaitingForBootstrapReason, fmt.Sprintf("bootstrap data Secret %s does not exist yet", name))
			return nil, ctrl.Result{RequeueAfter: secretRecheck}, nil
		}
		return nil, ctrl.Result{}, err
	}
	data, ok := secret.Data["value"]
	if !ok {
		setVM(qm, metav1.ConditionFalse, qemuv1.WaitingForBootstrapReason, fmt.Sprintf("bootstrap data Secret %s has no key \"value\": the bootstrap provider writes the data there", name))
		return nil, ctrl.Result{}, nil
	}
	return data, ctrl.Result{}, nil
}

// choosePorts picks the machine's host ports and leaves them in its
// status; the kit writes them as this reconcile ends, and the VM starts
// with them in a later one, so a port is never used before it is on record.
func (r *machineReconciler) choosePorts(ctx context.Context, s *machineScope) error {
	taken, err := r.portsInUse(ctx, s.key)
	if err != nil {
		return err
	}
	// A few spare candidates in case some are taken.
	candidates, err := freePorts(portsNeeded(s.qm.Status.Ports, s.controlPlane) + 4)
	if err != nil {
		return fmt.Errorf("asking for free ports: %w", err)
	}
	ports, err := choosePorts(s.qm.Status.Ports, s.controlPlane, candidates, taken)
	if err != nil {
		setVM(s.qm, metav1.ConditionFalse, qemuv1.NoPortsReason, err.Error())
		return err
	}
	s.qm.Status.Ports = ports
	setVM(s.qm, metav1.ConditionFalse, qemuv1.StartingReason, "host ports chosen; the VM starts next")
	return nil
}

// chooseAddress picks the machine's address on its cluster's network and
// leaves it in its status; like the ports, the VM starts with it in a later
// reconcile, once it is on record. Addresses are unique in the namespace
// (a superset of unique in the cluster), and reserved in this process
// until the machine is deleted, so that two machines reconciled from a
// cache that has not seen the other's choice yet do not take the same.
func (r *machineReconciler) chooseAddress(ctx context.Context, s *machineScope) error {
	machines := &qemuv1.QEMUMachineList{}
	if err := r.client.List(ctx, machines, client.InNamespace(s.qm.Namespace)); err != nil {
		return err
	}
	taken := map[int]bool{}
	for i := range machines.Items {
		if m := &machines.Items[i]; m.Name != s.qm.Name {
			taken[hostOf(m.Status.NetworkAddress)] = true
		}
	}
	n := r.hosts.reserve(s.key, taken)
	if n == 0 {
		setVM(s.qm, metav1.ConditionFalse, qemuv1.InvalidNetworkReason, fmt.Sprintf(
			"every address of the VMs' network %s is taken by the namespace's QEMU machines: delete some first", segment))
		return nil
	}
	s.qm.Status.NetworkAddress = segmentAddress(n)
	setVM(s.qm, metav1.ConditionFalse, qemuv1.StartingReason, "address "+s.qm.Status.NetworkAddress+" chosen; the VM starts next")
	return nil
}

// portsInUse are the host ports other QEMUMachines and QEMUClusters have
// on record (their VMs or load balancers may not listen yet).
func (r *machineReconciler) portsInUse(ctx context.Context, self types.NamespacedName) (map[int]bool, error) {
	taken := map[int]bool{}
	machines := &qemuv1.QEMUMachineList{}
	if err := r.client.List(ctx, machines); err != nil {
		return nil, err
	}
	for i := range machines.Items {
		m := &machines.Items[i]
		if client.ObjectKeyFromObject(m) != self {
			taken[int(m.Status.Ports.SSH)], taken[int(m.Status.Ports.APIServer)] = true, true
		}
	}
	clusters := &qemuv1.QEMUClusterList{}
	if err := r.client.List(ctx, clusters); err != nil {
		return nil, err
	}
	for i := range clusters.Items {
		taken[int(clusters.Items[i].Spec.ControlPlaneEndpoint.Port)] = true
	}
	delete(taken, 0)
	return taken, nil
}

// observe reports the VM of a started machine, registers a control-plane
// machine's API server with the load balancer while the VM runs, and
// watches for the VM's end.
func (r *machineReconciler) observe(ctx context.Context, s *machineScope) (ctrl.Result, error) {
	qm := s.qm
	state, err := vm.Inspect(ctx, s.dir)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("inspecting the VM in %s: %w", s.dir, err)
	}
	qm.Status.Initialization.Provisioned = ptr.To(true)
	qm.Status.VM.PID = int32(state.PID)
	qm.Status.VM.State = state.Status
	if !state.Running {
		qm.Status.VM.PID, qm.Status.VM.State = 0, "exited"
	}
	qm.Status.Addresses = clusterv1.MachineAddresses{
		{Type: clusterv1.MachineHostName, Address: s.machine.Name},
		{Type: clusterv1.MachineInternalDNS, Address: s.machine.Name},
	}
	if qm.Status.NetworkAddress != "" {
		qm.Status.Addresses = append(qm.Status.Addresses, clusterv1.MachineAddress{Type: clusterv1.MachineInternalIP, Address: qm.Status.NetworkAddress})
	}
	qm.Status.Addresses = append(qm.Status.Addresses, clusterv1.MachineAddress{Type: clusterv1.MachineExternalIP, Address: "127.0.0.1"})
	v := vmVerdict(vmFacts{Started: true, Running: state.Running, Status: state.Status, Exited: state.Exited, ConsoleLog: vm.ConsoleLog(s.dir)})
	setVM(qm, v.Status, v.Reason, v.Message)
	if state.Running {
		r.notify.watchVM(s.dir, s.key)
		r.notify.watchReport(vm.ReportLog(s.dir), s.key)
	}
	report, err := readBootstrapReport(vm.ReportLog(s.dir))
	if err != nil {
		return ctrl.Result{}, err
	}
	b := bootstrapVerdict(bootstrapFacts{Report: report, Running: state.Running,
		ConsoleTail: vm.LastLines(vm.ConsoleLog(s.dir), 10), ConsoleLog: vm.ConsoleLog(s.dir)})
	conditions.Set(qm, metav1.Condition{Type: qemuv1.BootstrapSucceededCondition, Status: b.Status, Reason: b.Reason, Message: b.Message})
	if b.Status == metav1.ConditionFalse && v.Status == metav1.ConditionTrue {
		// The infrastructure the Machine needs is a node that bootstrapped:
		// a failed bootstrap makes the machine not ready (the Machine's
		// InfrastructureReady says why), so a MachineHealthCheck or a
		// user replaces it.
		conditions.Set(qm, metav1.Condition{Type: qemuv1.ReadyCondition, Status: metav1.ConditionFalse, Reason: b.Reason, Message: b.Message})
	}
	backends := r.layout.backends(qm.Namespace, s.cluster.Name)
	if s.controlPlane && qm.Status.Ports.APIServer != 0 && v.Status == metav1.ConditionTrue {
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(int(qm.Status.Ports.APIServer)))
		if err := local.SetBackend(backends, qm.Name, addr); err != nil {
			return ctrl.Result{}, fmt.Errorf("registering the API server with the load balancer: %w", err)
		}
	} else if err := local.RemoveBackend(backends, qm.Name); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, nil
}

func (r *machineReconciler) reconcileDelete(ctx context.Context, s *machineScope) (ctrl.Result, error) {
	qm := s.qm
	backends := ""
	if s.clusterName != "" {
		backends = r.layout.backends(qm.Namespace, s.clusterName)
	}
	steps := deletionSteps(deletionFacts{
		HasFinalizer: controllerutil.ContainsFinalizer(qm, qemuv1.QEMUMachineFinalizer),
		Backend:      backends != "" && exists(filepath.Join(backends, qm.Name)),
		VMStarted:    exists(filepath.Join(s.dir, startedMarker)),
		DirExists:    exists(s.dir),
	})
	r.images.forget(s.key)
	defer r.hosts.release(s.key)
	for _, step := range steps {
		var err error
		switch step {
		case stepRemoveBackend:
			err = local.RemoveBackend(backends, qm.Name)
		case stepRemoveVM:
			setVM(qm, metav1.ConditionFalse, qemuv1.DeletingReason, "stopping the VM and deleting its disk")
			err = vm.Remove(ctx, s.dir, vmStopGrace)
			if n := hostOf(qm.Status.NetworkAddress); err == nil && n != 0 && s.clusterName != "" {
				err = removeVMSocket(r.layout.lb(qm.Namespace, s.clusterName), n)
			}
		case stepRemoveDir:
			err = os.RemoveAll(s.dir)
			// The namespace's directory goes with its last machine.
			_ = os.Remove(filepath.Dir(s.dir))
		case stepRemoveFinalizer:
			ctrl.LoggerFrom(ctx).Info("Removed the VM", "dir", s.dir)
			controllerutil.RemoveFinalizer(qm, qemuv1.QEMUMachineFinalizer)
		}
		if err != nil {
			setVM(qm, metav1.ConditionFalse, qemuv1.DeletingReason, fmt.Sprintf("deleting the machine (%s): %v", step, err))
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{}, nil
}

// setVM sets VMProvisioned and, from it, Ready: the infrastructure is
// ready while the VM runs; what the guest does with its bootstrap data is
// the Machine's business.
func setVM(qm *qemuv1.QEMUMachine, status metav1.ConditionStatus, reason, msg string) {
	conditions.Set(qm, metav1.Condition{Type: qemuv1.VMProvisionedCondition, Status: status, Reason: reason, Message: msg})
	if status == metav1.ConditionTrue {
		reason = qemuv1.ReadyReason
	}
	conditions.Set(qm, metav1.Condition{Type: qemuv1.ReadyCondition, Status: status, Reason: reason, Message: msg})
}
