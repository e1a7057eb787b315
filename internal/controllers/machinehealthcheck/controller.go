package machinehealthcheck

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/kit"
	"capstan.dev/capstan/internal/pause"
	"capstan.dev/capstan/internal/plan"
	"capstan.dev/capstan/internal/workload"
)

// ProviderIDField indexes Machines by spec.providerID for this controller,
// so that a Node event finds its Machine (and from it the health checks)
// without listing every Machine.
const ProviderIDField = "machinehealthcheck.spec.providerID"

// FieldManager names this controller's server-side apply ownership of the
// Machine conditions it writes.
const FieldManager = "capstan-machinehealthcheck"

// Workload is what the controller needs of the workload cluster cache.
type Workload interface {
	GetClient(ctx context.Context, cluster client.ObjectKey) (client.Client, error)
	Watch(ctx context.Context, cluster client.ObjectKey, input workload.WatchInput) error
}

// Reconciler reconciles MachineHealthChecks.
type Reconciler struct {
	Client   client.Client
	Workload Workload
	Recorder events.EventRecorder

	controller controller.Controller
	kit        kit.Reconciler[*clusterv1.MachineHealthCheck, *scope]
}

// SetupWithManager registers the controller, its providerID index, and
// watches on Machines and Clusters.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts controller.Options) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &clusterv1.Machine{}, ProviderIDField, func(o client.Object) []string {
		if id := o.(*clusterv1.Machine).Spec.ProviderID; id != "" {
			return []string{id}
		}
		return nil
	}); err != nil {
		return err
	}
	r.kit = kit.Reconciler[*clusterv1.MachineHealthCheck, *scope]{
		Client:    r.Client,
		NewObject: func() *clusterv1.MachineHealthCheck { return &clusterv1.MachineHealthCheck{} },
		Scope:     r.scope,
		Run:       r.run,
		Report:    r.summarize,
	}
	c, err := ctrl.NewControllerManagedBy(mgr).
		For(&clusterv1.MachineHealthCheck{}).
		Watches(&clusterv1.Machine{}, handler.EnqueueRequestsFromMapFunc(r.machineToChecks)).
		Watches(&clusterv1.Cluster{}, handler.EnqueueRequestsFromMapFunc(r.clusterToChecks),
			// Targets are judged only in an initialized Cluster that is not
			// paused.
			builder.WithPredicates(kit.ClusterChanged(kit.ClusterPaused, kit.ClusterInfrastructureProvisioned, kit.ClusterControlPlaneInitialized))).
		WithOptions(opts).
		Named("machinehealthcheck").
		Build(r)
	if err != nil {
		return err
	}
	r.controller = c
	return nil
}

func clusterInitialized(c *clusterv1.Cluster) bool {
	return ptr.Deref(c.Status.Initialization.InfrastructureProvisioned, false) &&
		ptr.Deref(c.Status.Initialization.ControlPlaneInitialized, false)
}

func (r *Reconciler) clusterToChecks(ctx context.Context, obj client.Object) []reconcile.Request {
	return r.checksFor(ctx, obj.GetNamespace(), obj.GetName(), nil)
}

func (r *Reconciler) machineToChecks(ctx context.Context, obj client.Object) []reconcile.Request {
	m, ok := obj.(*clusterv1.Machine)
	if !ok {
		return nil
	}
	return r.checksFor(ctx, m.Namespace, m.Spec.ClusterName, m.Labels)
}

// checksFor lists the health checks of a cluster, and when machineLabels
// is not nil only those whose selector picks a Machine with those labels.
func (r *Reconciler) checksFor(ctx context.Context, namespace, cluster string, machineLabels map[string]string) []reconcile.Request {
	list := &clusterv1.MachineHealthCheckList{}
	if err := r.Client.List(ctx, list, client.InNamespace(namespace)); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for i := range list.Items {
		mhc := &list.Items[i]
		if mhc.Spec.ClusterName != cluster {
			continue
		}
		if machineLabels != nil {
			sel, err := metav1.LabelSelectorAsSelector(&mhc.Spec.Selector)
			if err != nil || sel.Empty() || !sel.Matches(labels.Set(machineLabels)) {
				continue
			}
		}
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(mhc)})
	}
	return reqs
}

// nodeToChecks maps a workload cluster's Node to the health checks of the
// Machine that carries its providerID.
func (r *Reconciler) nodeToChecks(namespace string) handler.MapFunc {
	return func(ctx context.Context, obj client.Object) []reconcile.Request {
		node, ok := obj.(*corev1.Node)
		if !ok || node.Spec.ProviderID == "" {
			return nil
		}
		machines := &clusterv1.MachineList{}
		if err := r.Client.List(ctx, machines, client.InNamespace(namespace), client.MatchingFields{ProviderIDField: node.Spec.ProviderID}); err != nil {
			return nil
		}
		var reqs []reconcile.Request
		for i := range machines.Items {
			reqs = append(reqs, r.machineToChecks(ctx, &machines.Items[i])...)
		}
		return reqs
	}
}

// scope is what one reconcile of a MachineHealthCheck gathers and decides.
type scope struct {
	mhc     *clusterv1.MachineHealthCheck
	cluster *clusterv1.Cluster
	now     time.Time
	paused  bool

	machines []*clusterv1.Machine // the targets, sorted by name
	nodes    map[string]*corev1.Node
	// notJudged says why the targets were not judged (cluster not
	// initialized, workload unreachable); empty when they were.
	notJudged string
	decision  *plan.HealthDecision
	// templateMissing says what is wrong with spec.remediation.templateRef.
	templateMissing string
}

// Reconcile judges one MachineHealthCheck's targets and asks for the
// unhealthy ones to be remediated.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return r.kit.Reconcile(ctx, req)
}

func (r *Reconciler) scope(ctx context.Context, mhc *clusterv1.MachineHealthCheck) (*scope, error) {
	cluster, err := kit.GetCluster(ctx, r.Client, mhc.Namespace, mhc.Spec.ClusterName)
	if err != nil {
		return nil, err
	}
	return &scope{mhc: mhc, cluster: cluster, now: time.Now()}, nil
}

func (r *Reconciler) run(ctx context.Context, s *scope) (ctrl.Result, error) {
	mhc := s.mhc
	if !mhc.DeletionTimestamp.IsZero() {
		// A deleting health check judges nothing and reports nothing.
		return ctrl.Result{}, nil
	}
	if s.paused = pause.Reconcile(s.cluster, mhc); s.paused {
		return ctrl.Result{}, nil
	}
	if s.cluster == nil {
		s.notJudged = "Cluster " + mhc.Spec.ClusterName + " does not exist"
		return ctrl.Result{}, nil
	}
	// The health check belongs to its Cluster and goes with it.
	if err := controllerutil.SetOwnerReference(s.cluster, mhc, r.Client.Scheme()); err != nil {
		return ctrl.Result{}, err
	}
	return kit.Steps(ctx, s,
		r.checkRemediationTemplate,
		r.reconcileTargets,
		r.reconcileNodes,
		r.reconcileHealth,
	)
}
