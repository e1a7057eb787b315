package clusterresourceset

import (
	"context"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	addonsv1 "capstan.dev/capstan/api/addons/v1beta2"
	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/kit"
)

func ownerRef(crs *addonsv1.ClusterResourceSet) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion: addonsv1.GroupVersion.String(),
		Kind:       addonsv1.ClusterResourceSetKind,
		Name:       crs.Name,
		UID:        crs.UID,
	}
}

// writeBinding records entry as crs's entry in the Cluster's binding,
// creating the binding when there is none (binding is nil) and writing
// nothing when the entry is already there. crs becomes one of the binding's
// owners. It waits until the cache shows what it wrote, so that the next
// reconcile does not apply again from an old record.
func (r *Reconciler) writeBinding(ctx context.Context, crs *addonsv1.ClusterResourceSet, cluster *clusterv1.Cluster, binding *addonsv1.ClusterResourceSetBinding, entry addonsv1.ResourceSetBinding) error {
	if binding == nil {
		binding = &addonsv1.ClusterResourceSetBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: cluster.Namespace, Name: cluster.Name, OwnerReferences: []metav1.OwnerReference{ownerRef(crs)}},
			Spec:       addonsv1.ClusterResourceSetBindingSpec{ClusterName: cluster.Name, Bindings: []addonsv1.ResourceSetBinding{entry}},
		}
		if err := r.Client.Create(ctx, binding); err != nil {
			return fmt.Errorf("creating ClusterResourceSetBinding %s: %w", binding.Name, err)
		}
		return kit.WaitForCache(ctx, r.Client, kit.Created, binding)
	}
	before := binding.DeepCopy()
	if e := binding.Entry(crs.Name); e != nil {
		*e = entry
	} else {
		binding.Spec.Bindings = append(binding.Spec.Bindings, entry)
	}
	if !slices.ContainsFunc(binding.OwnerReferences, func(o metav1.OwnerReference) bool { return o.UID == crs.UID }) {
		binding.OwnerReferences = append(binding.OwnerReferences, ownerRef(crs))
	}
	return r.patchBinding(ctx, before, binding)
}

// patchBinding writes what changed of a binding, over the version it was
// read at: every ClusterResourceSet of a Cluster writes the one list of
// entries, and a blind write could drop another's.
func (r *Reconciler) patchBinding(ctx context.Context, before, after *addonsv1.ClusterResourceSetBinding) error {
	if equalBinding(before, after) {
		return nil
	}
	if err := r.Client.Patch(ctx, after, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("updating ClusterResourceSetBinding %s: %w", after.Name, err)
	}
	return kit.WaitForCache(ctx, r.Client, func(_, got client.Object, err error) bool {
		return err == nil && got.GetResourceVersion() != before.GetResourceVersion()
	}, after)
}

func equalBinding(a, b *addonsv1.ClusterResourceSetBinding) bool {
	return slices.EqualFunc(a.OwnerReferences, b.OwnerReferences, func(x, y metav1.OwnerReference) bool { return x.UID == y.UID }) &&
		equalEntries(a.Spec.Bindings, b.Spec.Bindings)
}

func equalEntries(a, b []addonsv1.ResourceSetBinding) bool {
	return slices.EqualFunc(a, b, func(x, y addonsv1.ResourceSetBinding) bool {
		return x.ClusterResourceSetName == y.ClusterResourceSetName && slices.EqualFunc(x.Resources, y.Resources, func(p, q addonsv1.ResourceBinding) bool {
			return p.ResourceRef == q.ResourceRef && p.Hash == q.Hash && p.LastAppliedTime.Equal(&q.LastAppliedTime) &&
				(p.Applied == nil) == (q.Applied == nil) && (p.Applied == nil || *p.Applied == *q.Applied)
		})
	})
}

// releaseBindings removes crs's entries and ownership from every binding of
// its namespace, deleting a binding left with no entry. What crs applied
// stays in the workload clusters.
func (r *Reconciler) releaseBindings(ctx context.Context, crs *addonsv1.ClusterResourceSet) error {
	list := &addonsv1.ClusterResourceSetBindingList{}
	if err := r.Client.List(ctx, list, client.InNamespace(crs.Namespace)); err != nil {
		return err
	}
	for i := range list.Items {
		b := &list.Items[i]
		before := b.DeepCopy()
		b.Spec.Bindings = slices.DeleteFunc(b.Spec.Bindings, func(e addonsv1.ResourceSetBinding) bool { return e.ClusterResourceSetName == crs.Name })
		b.OwnerReferences = slices.DeleteFunc(b.OwnerReferences, func(o metav1.OwnerReference) bool {
			return o.UID == crs.UID || (o.Kind == addonsv1.ClusterResourceSetKind && o.Name == crs.Name)
		})
		if len(b.Spec.Bindings) == len(before.Spec.Bindings) && len(b.OwnerReferences) == len(before.OwnerReferences) {
			continue
		}
		if len(b.Spec.Bindings) == 0 {
			if err := r.Client.Delete(ctx, before, client.Preconditions{ResourceVersion: &before.ResourceVersion}); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("deleting ClusterResourceSetBinding %s: %w", b.Name, err)
			}
			if err := kit.WaitForCache(ctx, r.Client, kit.Deleted, before); err != nil {
				return err
			}
			continue
		}
		if err := r.patchBinding(ctx, before, b); err != nil {
			return err
		}
	}
	return nil
}

// BindingReconciler deletes the ClusterResourceSetBinding of a Cluster that
// is being deleted or is gone: what it recorded is about a workload cluster
// that will not be there any more.
type BindingReconciler struct {
	Client client.Client

	kit kit.Reconciler[*addonsv1.ClusterResourceSetBinding, *bindingScope]
}

type bindingScope struct {
	binding *addonsv1.ClusterResourceSetBinding
	cluster *clusterv1.Cluster
}

// SetupWithManager registers the controller, woken by its bindings and by
// the deletion of Clusters.
func (r *BindingReconciler) SetupWithManager(_ context.Context, mgr ctrl.Manager, opts controller.Options) error {
	r.kit = kit.Reconciler[*addonsv1.ClusterResourceSetBinding, *bindingScope]{
		Client:    r.Client,
		NewObject: func() *addonsv1.ClusterResourceSetBinding { return &addonsv1.ClusterResourceSetBinding{} },
		Scope: func(ctx context.Context, b *addonsv1.ClusterResourceSetBinding) (*bindingScope, error) {
			cluster, err := kit.GetCluster(ctx, r.Client, b.Namespace, b.Spec.ClusterName)
			return &bindingScope{binding: b, cluster: cluster}, err
		},
		Run: r.run,
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&addonsv1.ClusterResourceSetBinding{}).
		Watches(&clusterv1.Cluster{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			// A binding is named after its Cluster.
			return []reconcile.Request{{NamespacedName: client.ObjectKeyFromObject(o)}}
		}), builder.WithPredicates(kit.ClusterChanged(kit.ClusterDeleting))).
		WithOptions(opts).
		Named("clusterresourcesetbinding").
		Complete(r)
}

// Reconcile deletes the binding when its Cluster goes.
func (r *BindingReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return r.kit.Reconcile(ctx, req)
}

func (r *BindingReconciler) run(ctx context.Context, s *bindingScope) (ctrl.Result, error) {
	if s.cluster != nil && s.cluster.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	if !s.binding.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	ctrl.LoggerFrom(ctx).Info("Deleting ClusterResourceSetBinding of a deleted Cluster", "cluster", s.binding.Spec.ClusterName)
	if err := r.Client.Delete(ctx, s.binding); client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, nil
}
