package inmemory

import (
	"context"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	inmemoryv1 "capstan.dev/capstan/api/infrastructure/inmemory/v1beta2"
	"capstan.dev/capstan/internal/certs"
	"capstan.dev/capstan/internal/kit"
	"capstan.dev/capstan/internal/pace"
	"capstan.dev/capstan/internal/patch"
	"capstan.dev/capstan/internal/providers/pool"
)

// Options configure the in-memory provider.
type Options struct {
	// Delays are the provider-wide simulated start-up delays; an
	// InMemoryCluster's or InMemoryMachine's spec.delays win field by
	// field. Nil fields take the defaults (machine 10s, others 2s, ±20%).
	Delays *Delays
	// Host is the address the simulated API servers and etcd members
	// listen on; empty means 127.0.0.1.
	Host string
	// MaxConcurrentReconciles per controller; 0 means 10.
	MaxConcurrentReconciles int
}

// Controller names, as they appear in logs and metrics.
const (
	InMemoryClusterController = "inmemorycluster"
	InMemoryMachineController = "inmemorymachine"
)

// fieldManager owns the provider's conditions on its objects.
const fieldManager = "capstan-inmemory-provider"

var ownedConditions = patch.OwnedConditions(fieldManager, inmemoryv1.ReadyCondition)

// Provider is a running in-memory provider; Setup returns it so that
// callers (the benchmark) can see what it serves.
type Provider struct {
	sim *simulator
}

// Clusters is the number of simulated clusters running.
func (p *Provider) Clusters() int {
	p.sim.mu.Lock()
	defer p.sim.mu.Unlock()
	return len(p.sim.clus)
}

// Requests is the number of requests all simulated API servers answered.
func (p *Provider) Requests() int64 { return p.sim.calls.Load() }

// Setup registers the InMemoryCluster, InMemoryMachine and
// InMemoryMachinePool controllers with mgr; the simulated clusters stop with the manager.
func Setup(ctx context.Context, mgr ctrl.Manager, o Options) (*Provider, error) {
	if err := inmemoryv1.AddToScheme(mgr.GetScheme()); err != nil {
		return nil, err
	}
	host := o.Host
	if host == "" {
		host = "127.0.0.1"
	}
	reader := mgr.GetAPIReader()
	load := func(ctx context.Context, cluster types.NamespacedName) (*certs.ClusterCertificates, error) {
		return certs.Lookup(ctx, reader, cluster)
	}
	sim := newSimulator(host, load, mgr.GetLogger().WithName("inmemory"))
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		<-ctx.Done()
		sim.closeAll()
		return nil
	})); err != nil {
		return nil, err
	}
	var defaults Delays
	if o.Delays != nil {
		defaults = *o.Delays
	}
	opts := kit.ProviderOptions(o.MaxConcurrentReconciles)
	clusters := &clusterReconciler{client: mgr.GetClient(), sim: sim}
	pausedChanged := builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))
	err := ctrl.NewControllerManagedBy(mgr).
		Named(InMemoryClusterController).
		WithOptions(opts).
		For(&inmemoryv1.InMemoryCluster{}).
		Watches(&clusterv1.Cluster{}, handler.EnqueueRequestsFromMapFunc(kit.ToInfrastructure(inmemoryv1.GroupVersion.Group, "InMemoryCluster")), pausedChanged).
		Complete(&kit.Reconciler[*inmemoryv1.InMemoryCluster, *clusterScope]{
			Client:    mgr.GetClient(),
			NewObject: func() *inmemoryv1.InMemoryCluster { return &inmemoryv1.InMemoryCluster{} },
			Pacer:     pace.NewPacer(pace.DefaultStatusInterval),
			Gate:      pace.AllButTexts,
			Options:   []patch.Option{ownedConditions},
			Scope:     clusters.scope,
			Run:       clusters.run,
		})
	if err != nil {
		return nil, err
	}
	machines := &machineReconciler{client: mgr.GetClient(), sim: sim, defaults: defaults}
	err = ctrl.NewControllerManagedBy(mgr).
		Named(InMemoryMachineController).
		WithOptions(opts).
		For(&inmemoryv1.InMemoryMachine{}).
		Watches(&clusterv1.Machine{}, handler.EnqueueRequestsFromMapFunc(kit.ToInfrastructure(inmemoryv1.GroupVersion.Group, "InMemoryMachine"))).
		Complete(&kit.Reconciler[*inmemoryv1.InMemoryMachine, *machineScope]{
			Client:    mgr.GetClient(),
			NewObject: func() *inmemoryv1.InMemoryMachine { return &inmemoryv1.InMemoryMachine{} },
			Pacer:     pace.NewPacer(pace.DefaultStatusInterval),
			Gate:      pace.AllButTexts,
			Options:   []patch.Option{ownedConditions},
			Scope:     machines.scope,
			Run:       machines.run,
			// Deleted before it booted: nothing ran, only its timer goes.
			Gone: func(key client.ObjectKey) { machines.bootAt.Delete(key) },
		})
	if err != nil {
		return nil, err
	}
	pools := &poolReconciler{client: mgr.GetClient()}
	err = pool.SetupController(mgr, InMemoryMachinePoolController, opts, &inmemoryv1.InMemoryMachine{},
		&kit.Reconciler[*inmemoryv1.InMemoryMachinePool, *poolScope]{
			Client:    mgr.GetClient(),
			NewObject: func() *inmemoryv1.InMemoryMachinePool { return &inmemoryv1.InMemoryMachinePool{} },
			Pacer:     pace.NewPacer(pace.DefaultStatusInterval),
			Gate:      pace.AllButTexts,
			Options:   []patch.Option{ownedConditions},
			Scope:     pools.scope,
			Run:       pools.run,
		})
	if err != nil {
		return nil, err
	}
	return &Provider{sim: sim}, nil
}

func isInMemoryRef(ref clusterv1.ContractVersionedObjectReference, kind string) bool {
	return ref.Kind == kind && ref.APIGroup == inmemoryv1.GroupVersion.Group && ref.Name != ""
}

func paused(c *clusterv1.Cluster, obj metav1.Object) bool {
	_, annotated := obj.GetAnnotations()[clusterv1.PausedAnnotation]
	return annotated || (c != nil && ptr.Deref(c.Spec.Paused, false))
}

// clusterReconciler runs each InMemoryCluster's simulated API server and
// publishes its address as the control-plane endpoint.
type clusterReconciler struct {
	client client.Client
	sim    *simulator
}

// clusterScope is what one reconcile of an InMemoryCluster knows.
type clusterScope struct {
	imc *inmemoryv1.InMemoryCluster
	key types.NamespacedName // of the owning Cluster
	// cluster is nil once the Cluster is gone.
	cluster *clusterv1.Cluster
}

func (r *clusterReconciler) scope(ctx context.Context, imc *inmemoryv1.InMemoryCluster) (*clusterScope, error) {
	clusterName := kit.CoreOwnerName(imc, clusterv1.ClusterKind)
	if clusterName == "" {
		return nil, kit.NotYet(0) // the Cluster controller sets the owner, which brings us back
	}
	cluster, err := kit.GetCluster(ctx, r.client, imc.Namespace, clusterName)
	if err != nil {
		return nil, err
	}
	return &clusterScope{imc: imc, key: types.NamespacedName{Namespace: imc.Namespace, Name: clusterName}, cluster: cluster}, nil
}

func (r *clusterReconciler) run(_ context.Context, s *clusterScope) (ctrl.Result, error) {
	imc := s.imc
	if !imc.DeletionTimestamp.IsZero() {
		r.sim.remove(s.key)
		controllerutil.RemoveFinalizer(imc, inmemoryv1.InMemoryClusterFinalizer)
		return ctrl.Result{}, nil
	}
	if s.cluster == nil || paused(s.cluster, imc) {
		return ctrl.Result{}, nil
	}
	sc, err := r.sim.cluster(s.key, imc.Spec.ControlPlaneEndpoint.Port)
	if err != nil {
		return ctrl.Result{}, err
	}
	controllerutil.AddFinalizer(imc, inmemoryv1.InMemoryClusterFinalizer)
	if imc.Spec.ControlPlaneEndpoint.Port == 0 {
		imc.Spec.ControlPlaneEndpoint = clusterv1.APIEndpoint{Host: r.sim.host, Port: sc.port()}
	}
	imc.Status.Initialization.Provisioned = ptr.To(true)
	meta.SetStatusCondition(&imc.Status.Conditions, metav1.Condition{
		Type: inmemoryv1.ReadyCondition, Status: metav1.ConditionTrue, Reason: inmemoryv1.ReadyReason,
		ObservedGeneration: imc.Generation,
		Message:            fmt.Sprintf("the simulated API server listens on %s:%d", r.sim.host, sc.port()),
	})
	return ctrl.Result{}, nil
}

// machineReconciler boots simulated machines once their bootstrap data is
// ready, and stops them when they are deleted.
type machineReconciler struct {
	client   client.Client
	sim      *simulator
	defaults Delays
	// bootAt is when each machine (by name) finishes booting; it lives as
	// long as the process, like the simulated machines themselves.
	bootAt sync.Map
}

// machineScope is what one reconcile of an InMemoryMachine knows.
type machineScope struct {
	imm *inmemoryv1.InMemoryMachine
	// machine is the owning Machine, empty until it exists.
	machine *clusterv1.Machine
}

func (r *machineReconciler) scope(ctx context.Context, imm *inmemoryv1.InMemoryMachine) (*machineScope, error) {
	s := &machineScope{imm: imm, machine: &clusterv1.Machine{}}
	if name := kit.CoreOwnerName(imm, clusterv1.MachineKind); name != "" {
		if err := r.client.Get(ctx, types.NamespacedName{Namespace: imm.Namespace, Name: name}, s.machine); err != nil && !apierrors.IsNotFound(err) {
			return nil, err
		}
	}
	return s, nil
}

func (r *machineReconciler) run(ctx context.Context, s *machineScope) (ctrl.Result, error) {
	imm, machine := s.imm, s.machine
	name := client.ObjectKeyFromObject(imm)
	if !imm.DeletionTimestamp.IsZero() {
		clusterName := imm.Labels[clusterv1.ClusterNameLabel]
		if clusterName == "" {
			clusterName = machine.Spec.ClusterName
		}
		if sc := r.sim.get(types.NamespacedName{Namespace: imm.Namespace, Name: clusterName}); sc != nil {
			sc.shutdown(nodeName(imm, machine))
		}
		r.bootAt.Delete(name)
		controllerutil.RemoveFinalizer(imm, inmemoryv1.InMemoryMachineFinalizer)
		return ctrl.Result{}, nil
	}
	if machine.Name == "" {
		return ctrl.Result{}, nil // the Machine controller sets the owner, which brings us back
	}
	cluster := &clusterv1.Cluster{}
	key := types.NamespacedName{Namespace: imm.Namespace, Name: machine.Spec.ClusterName}
	if err := r.client.Get(ctx, key, cluster); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if paused(cluster, imm) {
		return ctrl.Result{}, nil
	}
	if machine.Spec.Bootstrap.DataSecretName == nil {
		// The Machine's update when its bootstrap data is ready brings us back.
		return ctrl.Result{}, nil
	}
	sc := r.sim.get(key)
	if sc == nil {
		// The InMemoryCluster starts it; Machines get bootstrap data only
		// after the cluster's infrastructure is provisioned.
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
	delays := r.delays(ctx, cluster, imm)
	if !ptr.Deref(imm.Status.Initialization.Provisioned, false) {
		at, _ := r.bootAt.LoadOrStore(name, time.Now().Add(delays.machineDelay()))
		if wait := time.Until(at.(time.Time)); wait > 0 {
			return ctrl.Result{RequeueAfter: wait}, nil
		}
		// Until now there was nothing to clean up; the finalizer and the
		// providerID go out with the boot, in one write besides the status.
		controllerutil.AddFinalizer(imm, inmemoryv1.InMemoryMachineFinalizer)
		if imm.Spec.ProviderID == "" {
			imm.Spec.ProviderID = "inmemory://" + imm.Namespace + "/" + imm.Name
		}
		imm.Status.Initialization.Provisioned = ptr.To(true)
		imm.Status.Addresses = clusterv1.MachineAddresses{
			{Type: clusterv1.MachineInternalIP, Address: r.sim.host},
			{Type: clusterv1.MachineHostName, Address: nodeName(imm, machine)},
		}
		meta.SetStatusCondition(&imm.Status.Conditions, metav1.Condition{
			Type: inmemoryv1.ReadyCondition, Status: metav1.ConditionTrue, Reason: inmemoryv1.ReadyReason,
			ObservedGeneration: imm.Generation, Message: "the simulated machine booted",
		})
	}
	// Booting is idempotent: a boot whose write fails is booted again when
	// the write is retried.
	_, controlPlane := machine.Labels[clusterv1.MachineControlPlaneLabel]
	sc.boot(machineSpec{
		nodeName: nodeName(imm, machine), providerID: imm.Spec.ProviderID, version: machine.Spec.Version,
		controlPlane: controlPlane, delays: delays,
	})
	return ctrl.Result{}, nil
}

// delays resolves a machine's delays: its own spec, its InMemoryCluster's,
// the provider's options, the defaults.
func (r *machineReconciler) delays(ctx context.Context, cluster *clusterv1.Cluster, imm *inmemoryv1.InMemoryMachine) resolvedDelays {
	levels := []Delays{fromAPI(imm.Spec.Delays)}
	if isInMemoryRef(cluster.Spec.InfrastructureRef, "InMemoryCluster") {
		imc := &inmemoryv1.InMemoryCluster{}
		if err := r.client.Get(ctx, types.NamespacedName{Namespace: cluster.Namespace, Name: cluster.Spec.InfrastructureRef.Name}, imc); err == nil {
			levels = append(levels, fromAPI(imc.Spec.Delays))
		}
	}
	return resolve(append(levels, r.defaults)...)
}

// nodeName is the Machine's name, as kubeadm names a node after its host.
func nodeName(imm *inmemoryv1.InMemoryMachine, m *clusterv1.Machine) string {
	for _, a := range imm.Status.Addresses {
		if a.Type == clusterv1.MachineHostName {
			return a.Address // what the machine booted as
		}
	}
	if m != nil && m.Name != "" {
		return m.Name
	}
	return imm.Name
}
