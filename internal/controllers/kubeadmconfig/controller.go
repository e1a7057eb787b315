package kubeadmconfig

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	bootstrapv1 "capstan.dev/capstan/api/bootstrap/kubeadm/v1beta2"
	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/conditions"
	"capstan.dev/capstan/internal/index"
	"capstan.dev/capstan/internal/kit"
	"capstan.dev/capstan/internal/pace"
	"capstan.dev/capstan/internal/patch"
	"capstan.dev/capstan/internal/pause"
)

// DefaultTokenTTL is how long a generated bootstrap token lives without a
// refresh: long enough for a machine to boot, short enough that a leaked
// bootstrap data secret is soon useless.
const DefaultTokenTTL = 15 * time.Minute

// Workload is what the controller needs of the workload cluster cache
// (*workload.ClusterCache): a client to create bootstrap tokens with.
type Workload interface {
	GetClient(ctx context.Context, cluster client.ObjectKey) (client.Client, error)
}

// Reconciler reconciles KubeadmConfigs.
type Reconciler struct {
	Client   client.Client
	Workload Workload
	Recorder events.EventRecorder

	// TokenTTL is the lifetime of generated bootstrap tokens; DefaultTokenTTL when zero.
	TokenTTL time.Duration
	kit      kit.Reconciler[*bootstrapv1.KubeadmConfig, *scope]
}

// statusGate: every change of a KubeadmConfig's status goes out at once
// except a changed condition message or reason, which is paced.
var statusGate = pace.AllButTexts

func (r *Reconciler) tokenTTL() time.Duration {
	if r.TokenTTL > 0 {
		return r.TokenTTL
	}
	return DefaultTokenTTL
}

// SetupWithManager registers the controller with watches on Machines (a
// Machine appearing after its config, as its creator makes them, lets the
// config find its owner; a Node showing up ends token refreshes; a
// control-plane Machine going away frees the init lock) and on Clusters (infrastructure, initialization and
// pause decide what a config may do).
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts controller.Options) error {
	r.kit = kit.Reconciler[*bootstrapv1.KubeadmConfig, *scope]{
		Client:    r.Client,
		NewObject: func() *bootstrapv1.KubeadmConfig { return &bootstrapv1.KubeadmConfig{} },
		Pacer:     pace.NewPacer(pace.DefaultStatusInterval, pace.FirstAtOnce()),
		Gate:      statusGate,
		Options:   []patch.Option{patch.SoleStatusWriter()},
		Scope:     r.scope,
		Run:       r.run,
		Report:    summarize,
	}
	if err := index.ByClusterName(ctx, mgr.GetFieldIndexer(), &bootstrapv1.KubeadmConfig{}); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&bootstrapv1.KubeadmConfig{}).
		Watches(&clusterv1.Machine{}, handler.EnqueueRequestsFromMapFunc(r.machineToConfigs),
			builder.WithPredicates(predicate.Funcs{
				GenericFunc: func(event.GenericEvent) bool { return false },
				UpdateFunc:  machineChangeMatters,
			})).
		Watches(&clusterv1.Cluster{}, handler.EnqueueRequestsFromMapFunc(r.clusterToConfigs),
			// Infrastructure, initialization, the endpoint and pause decide
			// what a config may do.
			builder.WithPredicates(kit.ClusterChanged(kit.ClusterPaused, kit.ClusterInfrastructureProvisioned,
				kit.ClusterControlPlaneInitialized, kit.ClusterEndpoint))).
		WithOptions(opts).
		Named("kubeadmconfig").
		Complete(r)
}

// machineChangeMatters: a Node reference appearing (stop refreshing the
// token) or deletion starting.
func machineChangeMatters(e event.UpdateEvent) bool {
	before, ok1 := e.ObjectOld.(*clusterv1.Machine)
	after, ok2 := e.ObjectNew.(*clusterv1.Machine)
	if !ok1 || !ok2 {
		return true
	}
	return before.Status.NodeRef.Name != after.Status.NodeRef.Name ||
		before.DeletionTimestamp.IsZero() != after.DeletionTimestamp.IsZero() ||
		ptr.Deref(before.Spec.Bootstrap.DataSecretName, "") != ptr.Deref(after.Spec.Bootstrap.DataSecretName, "")
}

// machineToConfigs maps a Machine to its KubeadmConfig and, when a
// control-plane Machine is deleted, to the configs of its cluster that may
// be waiting for the init lock it held.
func (r *Reconciler) machineToConfigs(ctx context.Context, obj client.Object) []reconcile.Request {
	m, ok := obj.(*clusterv1.Machine)
	if !ok {
		return nil
	}
	var reqs []reconcile.Request
	if ref := m.Spec.Bootstrap.ConfigRef; ref.Kind == "KubeadmConfig" && ref.Name != "" {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKey{Namespace: m.Namespace, Name: ref.Name}})
	}
	if _, cp := m.Labels[clusterv1.MachineControlPlaneLabel]; cp && !m.DeletionTimestamp.IsZero() {
		reqs = append(reqs, r.configsOf(ctx, m.Namespace, m.Spec.ClusterName, nil)...)
	}
	return reqs
}

// clusterToConfigs maps a Cluster to its configs without data and to those
// whose Paused condition no longer says what the Cluster's pause does (a
// move waits for every config to report the pause, data or not).
func (r *Reconciler) clusterToConfigs(ctx context.Context, obj client.Object) []reconcile.Request {
	cluster, ok := obj.(*clusterv1.Cluster)
	if !ok {
		return nil
	}
	return r.configsOf(ctx, cluster.Namespace, cluster.Name, func(cfg *bootstrapv1.KubeadmConfig) bool {
		paused, _ := pause.Check(cluster, cfg)
		return conditions.IsTrue(cfg, clusterv1.PausedCondition) != paused
	})
}

// configsOf lists the configs of a cluster that have no data yet, and
// those also that stale says are out of date: the others have nothing
// left to decide on a cluster change.
func (r *Reconciler) configsOf(ctx context.Context, namespace, cluster string, stale func(*bootstrapv1.KubeadmConfig) bool) []reconcile.Request {
	list := &bootstrapv1.KubeadmConfigList{}
	if err := r.Client.List(ctx, list, index.InCluster(namespace, cluster)...); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for i := range list.Items {
		if list.Items[i].Status.DataSecretName == "" || (stale != nil && stale(&list.Items[i])) {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return reqs
}

// scope is what one reconcile learns about a config.
type scope struct {
	config  *bootstrapv1.KubeadmConfig
	machine *clusterv1.Machine
	cluster *clusterv1.Cluster
	now     time.Time

	paused bool
	// waitReason/waitMessage say why the data secret does not exist yet.
	waitReason, waitMessage string
	dataErr                 error
	// certs is the CertificatesAvailable condition when this reconcile decided it.
	certs *certsState
	// generatedToken is the bootstrap token this reconcile minted for the
	// join, to keep with the data.
	generatedToken string
}

type certsState struct {
	ok      bool
	reason  string
	message string
}

func (s *scope) wait(reason, message string) {
	s.waitReason, s.waitMessage = reason, message
}

// Reconcile brings one KubeadmConfig a step closer to having its bootstrap data.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return r.kit.Reconcile(ctx, req)
}

func (r *Reconciler) scope(ctx context.Context, cfg *bootstrapv1.KubeadmConfig) (*scope, error) {
	machine, err := r.owningMachine(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if machine == nil {
		// No owner yet, or it is not in the cache yet: the owner reference
		// being set, or the Machine's creation, wakes us.
		return nil, kit.NotYet(0)
	}
	cluster, err := kit.GetCluster(ctx, r.Client, cfg.Namespace, machine.Spec.ClusterName)
	if err != nil {
		return nil, err
	}
	if cluster == nil {
		return nil, kit.NotYet(10 * time.Second)
	}
	return &scope{config: cfg, machine: machine, cluster: cluster, now: time.Now()}, nil
}

func (r *Reconciler) run(ctx context.Context, s *scope) (ctrl.Result, error) {
	cfg := s.config
	if s.paused = pause.Reconcile(s.cluster, cfg); s.paused {
		return ctrl.Result{}, nil
	}
	if !cfg.DeletionTimestamp.IsZero() {
		// The data secret goes with the config through its owner reference.
		return ctrl.Result{}, nil
	}
	// A problem only the user can fix (a referenced Secret sends no event
	// here) is retried slowly by the kit.
	requeue, err := r.reconcile(ctx, s)
	s.dataErr = err
	return ctrl.Result{RequeueAfter: requeue}, err
}

var machineGroup = clusterv1.GroupVersion.Group

// owningMachine is the Machine named by the config's owner references, or
// nil. A MachinePool's config (the pool controls it, and its data secret
// boots every instance of the pool) is answered as the Machine the pool's
// template describes: a worker that joins, named after the pool.
func (r *Reconciler) owningMachine(ctx context.Context, cfg *bootstrapv1.KubeadmConfig) (*clusterv1.Machine, error) {
	for _, ref := range cfg.OwnerReferences {
		gv, err := schema.ParseGroupVersion(ref.APIVersion)
		if err != nil || gv.Group != machineGroup {
			continue
		}
		switch ref.Kind {
		case clusterv1.MachineKind:
			m := &clusterv1.Machine{}
			if err := r.Client.Get(ctx, client.ObjectKey{Namespace: cfg.Namespace, Name: ref.Name}, m); err != nil {
				return nil, client.IgnoreNotFound(err)
			}
			return m, nil
		case clusterv1.MachinePoolKind:
			mp := &clusterv1.MachinePool{}
			if err := r.Client.Get(ctx, client.ObjectKey{Namespace: cfg.Namespace, Name: ref.Name}, mp); err != nil {
				return nil, client.IgnoreNotFound(err)
			}
			return poolMachine(mp), nil
		}
	}
	return nil, nil
}

// poolMachine is the Machine a MachinePool's template describes, as the
// config of the pool sees it. Its data secret name stays unset: the pool
// copies it from the config, not the other way round.
func poolMachine(mp *clusterv1.MachinePool) *clusterv1.Machine {
	m := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: mp.Name, Namespace: mp.Namespace, UID: mp.UID, Labels: mp.Spec.Template.Labels,
			DeletionTimestamp: mp.DeletionTimestamp},
		Spec: *mp.Spec.Template.Spec.DeepCopy(),
	}
	m.Spec.Bootstrap.DataSecretName = nil
	return m
}

func (r *Reconciler) event(regarding *bootstrapv1.KubeadmConfig, eventType, reason, action, note string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(regarding, nil, eventType, reason, action, note, args...)
	}
}
