package kubeadmcontrolplane

import (
	"context"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	bootstrapv1 "capstan.dev/capstan/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "capstan.dev/capstan/api/controlplane/kubeadm/v1beta2"
	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/certs"
	"capstan.dev/capstan/internal/contract"
	"capstan.dev/capstan/internal/index"
	"capstan.dev/capstan/internal/kit"
	"capstan.dev/capstan/internal/pace"
	"capstan.dev/capstan/internal/patch"
	"capstan.dev/capstan/internal/pause"
	"capstan.dev/capstan/internal/plan"
	"capstan.dev/capstan/internal/portforward"
	"capstan.dev/capstan/internal/workload"
)

// FieldManager is the field manager of every write the controller makes.
const FieldManager = "capstan-kubeadmcontrolplane"

// How soon to look again at what sends no event to the management cluster.
const (
	// etcd membership and health are not Kubernetes objects.
	unsettledRetry = 5 * time.Second
	// A healthy control plane is checked now and then all the same: an
	// etcd member can fail without any object changing.
	steadyRecheck = time.Minute
)

// Reconciler reconciles KubeadmControlPlanes.
type Reconciler struct {
	Client   client.Client
	Resolver *contract.Resolver
	Workload *workload.ClusterCache
	// Recorder receives an event for each Machine created or removed; it
	// may be nil.
	Recorder events.EventRecorder

	controller      controller.Controller
	templateWatches *contract.Tracker
	// leaveRequested remembers when each leaving Machine (by UID) was asked
	// to leave the load balancer.
	leaveRequested sync.Map
	// pacer paces the control plane's writes, to its own status and to
	// its Machines' conditions.
	pacer *pace.Pacer
	kit   kit.Reconciler[*controlplanev1.KubeadmControlPlane, *scope]
}

// statusGate is what others act on in a control plane's status: the Cluster
// copies its initialization, move waits for Paused. Counters and summaries
// are paced.
var statusGate = pace.Fields([]string{"initialization"}, clusterv1.PausedCondition)

// SetupWithManager registers the controller. It watches its control planes,
// their Machines, the Clusters that own them, the infrastructure templates
// they clone, and in each workload cluster the control-plane Pods.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts controller.Options) error {
	r.pacer = pace.NewPacer(pace.DefaultStatusInterval)
	r.kit = kit.Reconciler[*controlplanev1.KubeadmControlPlane, *scope]{
		Client:    r.Client,
		Writer:    r.writer(),
		NewObject: func() *controlplanev1.KubeadmControlPlane { return &controlplanev1.KubeadmControlPlane{} },
		Pacer:     r.pacer,
		Gate:      statusGate,
		Options:   []patch.Option{patch.SoleStatusWriter()},
		Scope:     r.scope,
		Run:       r.run,
		Report:    r.updateStatus,
	}
	if err := index.ByClusterName(ctx, mgr.GetFieldIndexer(), &clusterv1.Machine{}); err != nil {
		return err
	}
	b := ctrl.NewControllerManagedBy(mgr).
		For(&controlplanev1.KubeadmControlPlane{}, builder.WithPredicates(predicate.Or(
			predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}, predicate.LabelChangedPredicate{}))).
		Owns(&clusterv1.Machine{}).
		Watches(&clusterv1.Cluster{}, handler.EnqueueRequestsFromMapFunc(clusterToControlPlane)).
		WithOptions(opts).
		Named("kubeadmcontrolplane")
	if r.Workload != nil {
		// A workload cluster that stops answering, or answers again, wakes
		// its control plane: its health conditions must say at once that
		// they cannot know, and know again.
		b = b.WatchesRawSource(r.Workload.HealthSource(handler.EnqueueRequestsFromMapFunc(r.clusterKeyToControlPlane)))
	}
	c, err := b.Build(r)
	if err != nil {
		return err
	}
	r.controller = c
	r.templateWatches = &contract.Tracker{
		Controller: c,
		Cache:      mgr.GetCache(),
		Handler:    handler.EnqueueRequestsFromMapFunc(r.templateToControlPlanes),
		Predicates: []predicate.Predicate{predicate.Funcs{
			CreateFunc: func(event.CreateEvent) bool { return true },
			UpdateFunc: func(event.UpdateEvent) bool { return false },
			DeleteFunc: func(event.DeleteEvent) bool { return false },
		}},
	}
	return nil
}

func clusterToControlPlane(_ context.Context, obj client.Object) []ctrl.Request {
	c, ok := obj.(*clusterv1.Cluster)
	if !ok {
		return nil
	}
	ref := c.Spec.ControlPlaneRef
	if ref.Kind != "KubeadmControlPlane" || ref.APIGroup != controlplanev1.GroupVersion.Group {
		return nil
	}
	return []ctrl.Request{{NamespacedName: client.ObjectKey{Namespace: c.Namespace, Name: ref.Name}}}
}

// clusterKeyToControlPlane maps a Cluster known by its key alone (the
// workload cache's health events carry no more) to its control plane.
func (r *Reconciler) clusterKeyToControlPlane(ctx context.Context, obj client.Object) []ctrl.Request {
	c := &clusterv1.Cluster{}
	if err := r.Client.Get(ctx, client.ObjectKeyFromObject(obj), c); err != nil {
		return nil
	}
	return clusterToControlPlane(ctx, c)
}

func (r *Reconciler) templateToControlPlanes(ctx context.Context, obj client.Object) []ctrl.Request {
	list := &controlplanev1.KubeadmControlPlaneList{}
	if err := r.Client.List(ctx, list, client.InNamespace(obj.GetNamespace())); err != nil {
		return nil
	}
	gk := obj.GetObjectKind().GroupVersionKind().GroupKind()
	var out []ctrl.Request
	for _, kcp := range list.Items {
		ref := kcp.Spec.MachineTemplate.Spec.InfrastructureRef
		if ref.Name == obj.GetName() && ref.GroupKind() == gk {
			out = append(out, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(&kcp)})
		}
	}
	return out
}

// scope is everything one reconcile learns about a control plane.
type scope struct {
	kcp     *controlplanev1.KubeadmControlPlane
	cluster *clusterv1.Cluster
	now     time.Time
	paused  bool
	// unreported: this reconcile's state is not worth a status write.
	unreported bool

	waitingFor string // what keeps the control plane from acting, for conditions
	certs      *certs.ClusterCertificates
	certsErr   error

	machines     []*machineState
	machinesRead bool
	infraTmpl    *unstructured.Unstructured
	templateErr  error

	workload    client.Client // nil while the workload cluster cannot be reached
	workloadErr error
	// podDialer port-forwards to the workload cluster's Pods (etcd, the API
	// servers) through its API server; nil while it cannot be reached.
	podDialer   *portforward.Dialer
	initialized bool
	etcd        etcdState
	// components maps node names to the health of their control-plane Pods.
	components map[string]componentHealth

	action     plan.ControlPlaneAction
	actionErr  error
	deleting   string // what deletion waits for
	rolloutDue time.Time
}

// machineState is one control-plane Machine and what belongs to it.
type machineState struct {
	machine  *clusterv1.Machine
	config   *bootstrapv1.KubeadmConfig // nil when not found
	infra    *unstructured.Unstructured // nil when not read
	outdated []string                   // why it is not up to date
}

func (m *machineState) nodeName() string {
	if m.machine.Status.NodeRef.Name != "" {
		return m.machine.Status.NodeRef.Name
	}
	return m.machine.Name
}

// ownerGrace is how long a new control plane waits for its Cluster's owner
// reference before reporting that it has none.
const ownerGrace = 10 * time.Second

// Reconcile brings one control plane closer to its spec.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return r.kit.Reconcile(ctx, req)
}

func (r *Reconciler) scope(ctx context.Context, kcp *controlplanev1.KubeadmControlPlane) (*scope, error) {
	cluster, err := r.owningCluster(ctx, kcp)
	if err != nil {
		return nil, err
	}
	return &scope{kcp: kcp, cluster: cluster, now: time.Now()}, nil
}

func (r *Reconciler) run(ctx context.Context, s *scope) (ctrl.Result, error) {
	kcp, cluster := s.kcp, s.cluster
	if cluster == nil {
		s.waitingFor = "waiting for a Cluster to own this control plane (its spec.controlPlaneRef names it)"
		if !kcp.DeletionTimestamp.IsZero() {
			return ctrl.Result{}, r.reconcileDelete(ctx, s)
		}
		if age := s.now.Sub(kcp.CreationTimestamp.Time); age < ownerGrace {
			// Created with its Cluster, the control plane normally gets its
			// owner in a moment: a status saying it waits for one would be
			// overwritten at once. Say so only if the owner is late.
			s.unreported = true
			return ctrl.Result{RequeueAfter: ownerGrace - age}, nil
		}
		return ctrl.Result{}, nil
	}
	if s.paused = pause.Reconcile(cluster, kcp); s.paused {
		return ctrl.Result{}, nil
	}
	if !kcp.DeletionTimestamp.IsZero() {
		if err := r.readMachines(ctx, s); err != nil {
			return ctrl.Result{}, err
		}
		r.reconcileHooks(ctx, s)
		return ctrl.Result{RequeueAfter: r.hookRetry(s)}, r.reconcileDelete(ctx, s)
	}
	if kcp.Labels[clusterv1.ClusterNameLabel] != cluster.Name {
		// The label is how `kubectl get kcp` shows the cluster, and how
		// tools find a cluster's control plane.
		if kcp.Labels == nil {
			kcp.Labels = map[string]string{}
		}
		kcp.Labels[clusterv1.ClusterNameLabel] = cluster.Name
	}
	if controllerutil.AddFinalizer(kcp, controlplanev1.KubeadmControlPlaneFinalizer) {
		// The finalizer is written before anything is created, so nothing
		// this control plane makes can outlive it.
		return ctrl.Result{Requeue: true}, nil
	}
	return kit.Steps(ctx, s,
		r.reconcileCertificates,
		func(ctx context.Context, s *scope) (time.Duration, error) { return 0, r.readMachines(ctx, s) },
		r.readTemplate,
		r.reconcileUpToDate,
		r.readWorkload,
		func(ctx context.Context, s *scope) (time.Duration, error) {
			r.reconcileHooks(ctx, s)
			return r.hookRetry(s), nil
		},
		r.reconcileScale,
	)
}

// owningCluster is the Cluster named by the control plane's owner
// reference, which the Cluster controller sets; nil until then.
func (r *Reconciler) owningCluster(ctx context.Context, kcp *controlplanev1.KubeadmControlPlane) (*clusterv1.Cluster, error) {
	for _, ref := range kcp.OwnerReferences {
		if ref.Kind != "Cluster" || ref.APIVersion != clusterv1.GroupVersion.String() {
			continue
		}
		c := &clusterv1.Cluster{}
		err := r.Client.Get(ctx, client.ObjectKey{Namespace: kcp.Namespace, Name: ref.Name}, c)
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return c, err
	}
	return nil, nil
}

// reconcileCertificates makes sure the cluster's certificate authorities
// and its admin kubeconfig exist, once the infrastructure gives the cluster
// an endpoint.
func (r *Reconciler) reconcileCertificates(ctx context.Context, s *scope) (time.Duration, error) {
	if !ptrTrue(s.cluster.Status.Initialization.InfrastructureProvisioned) {
		s.waitingFor = "waiting for the cluster's infrastructure to be provisioned"
		return 0, nil
	}
	if !s.cluster.Spec.ControlPlaneEndpoint.IsValid() {
		s.waitingFor = "waiting for the cluster's control-plane endpoint (Cluster spec.controlPlaneEndpoint)"
		return 0, nil
	}
	owner := *metav1.NewControllerRef(s.kcp, controlplanev1.GroupVersion.WithKind("KubeadmControlPlane"))
	alg := keyAlgorithm(s.kcp)
	s.certs, s.certsErr = certs.LookupOrGenerate(ctx, r.writer(), client.ObjectKeyFromObject(s.cluster), owner, certs.WithKeyAlgorithm(alg))
	if s.certsErr != nil {
		return 0, s.certsErr
	}
	if err := certs.EnsureKubeconfig(ctx, r.writer(), s.cluster, s.cluster.Spec.ControlPlaneEndpoint.String(), s.certs.CA, alg, owner); err != nil {
		return 0, fmt.Errorf("cluster kubeconfig: %w", err)
	}
	return 0, nil
}

// keyAlgorithm is the algorithm of the keys the control plane generates
// for its cluster (CAs, service-account key, admin and etcd client
// certificates): the one its kubeadm configuration names, as kubeadm on
// its machines uses for theirs.
func keyAlgorithm(kcp *controlplanev1.KubeadmControlPlane) certs.KeyAlgorithm {
	return certs.FromEncryptionAlgorithm(kcp.Spec.KubeadmConfigSpec.ClusterConfiguration.EncryptionAlgorithm)
}

func (r *Reconciler) readTemplate(ctx context.Context, s *scope) (time.Duration, error) {
	ref := s.kcp.Spec.MachineTemplate.Spec.InfrastructureRef
	tmpl, err := r.Resolver.GetWatched(ctx, r.Client, r.templateWatches, ref, s.kcp.Namespace)
	if err != nil {
		s.templateErr = fmt.Errorf("spec.machineTemplate.spec.infrastructureRef: %s %s: %w", ref.Kind, ref.Name, err)
		if apierrors.IsNotFound(err) {
			return 0, nil // its creation wakes the control plane
		}
		return 0, s.templateErr
	}
	if err := contract.EnsureClusterOwner(ctx, r.writer(), tmpl, s.cluster); err != nil {
		return 0, err
	}
	s.infraTmpl = tmpl
	return 0, nil
}

func (r *Reconciler) writer() client.Client { return client.WithFieldOwner(r.Client, FieldManager) }

func (r *Reconciler) event(regarding, related client.Object, eventType, reason, action, note string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(regarding, related, eventType, reason, action, note, args...)
	}
}

func ptrTrue(b *bool) bool { return b != nil && *b }
