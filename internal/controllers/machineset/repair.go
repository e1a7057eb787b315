package machineset

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/contract"
	"capstan.dev/capstan/internal/patch"
)

// repairClones creates the bootstrap and infrastructure objects of the
// set's Machines that were never created: the set creates a Machine first
// and its objects right after, so a manager stopped in between, or a create
// that failed, leaves a Machine whose references name nothing.
//
// Only what this set itself would have cloned is created: the Machine must
// be one the set created (its field manager wrote the reference), the
// reference must name the clone of the current template under the
// Machine's name, and the Machine must not be being deleted nor have had its
// infrastructure provisioned (then a missing object was deleted on purpose
// or went with a failure, and recreating it would hide that). A Machine a
// user made and the set adopted gets nothing: its objects are the user's to
// create.
func (r *Reconciler) repairClones(ctx context.Context, s *scope) (time.Duration, error) {
	if !s.machinesRead || !s.cluster.DeletionTimestamp.IsZero() {
		return 0, nil
	}
	var errs []error
	var repaired []*unstructured.Unstructured
	for _, m := range s.machines {
		if s.adopt[m.Name] || !m.DeletionTimestamp.IsZero() || ptr.Deref(m.Status.Initialization.InfrastructureProvisioned, false) {
			continue
		}
		var missing []*unstructured.Unstructured
		// The bootstrap object is only needed until it has produced the
		// data secret.
		if ref := m.Spec.Bootstrap.ConfigRef; ref.IsDefined() && s.bootstrapTemplate != nil && ptr.Deref(m.Spec.Bootstrap.DataSecretName, "") == "" &&
			ref == contract.ClonedReference(s.bootstrapTemplate, m.Name) {
			gone, err := r.cloneMissing(ctx, m, ref, "spec", "bootstrap", "configRef")
			if err != nil {
				errs = append(errs, err)
			} else if gone {
				missing = append(missing, s.bootstrapTemplate)
			}
		}
		if ref := m.Spec.InfrastructureRef; s.infraTemplate != nil && ref == contract.ClonedReference(s.infraTemplate, m.Name) {
			gone, err := r.cloneMissing(ctx, m, ref, "spec", "infrastructureRef")
			if err != nil {
				errs = append(errs, err)
			} else if gone {
				missing = append(missing, s.infraTemplate)
			}
		}
		if len(missing) == 0 {
			continue
		}
		objs, err := r.repairMachine(ctx, s, m, missing)
		repaired = append(repaired, objs...)
		if err != nil {
			s.repairErr = err
			errs = append(errs, err)
			r.event(s.ms, m, "Warning", "FailedCreate", "Create", "Failed to create the missing objects of Machine %s: %v", m.Name, err)
		}
	}
	return 0, kerrors.NewAggregate(append(errs, patch.WaitForCache(ctx, r.clones, patch.Created, objects(repaired)...)))
}

// cloneMissing tells whether the object ref names is missing from the cache
// while the set's field manager wrote ref (at path) on the Machine.
func (r *Reconciler) cloneMissing(ctx context.Context, m *clusterv1.Machine, ref clusterv1.ContractVersionedObjectReference, path ...string) (bool, error) {
	gvk, err := r.Resolver.GroupVersionKind(ctx, ref)
	if err != nil {
		return false, err
	}
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gvk)
	switch err := r.clones.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: ref.Name}, obj); {
	case err == nil:
		return false, nil
	case !apierrors.IsNotFound(err):
		return false, err
	}
	// Reading managed fields costs a JSON decode, so it is left for the
	// rare Machine whose object is missing.
	return contract.SetByManager(m, FieldManager, path...), nil
}

// repairMachine clones the templates for one Machine, as createMachine would
// have, after checking again that the Machine is still there and not being
// deleted: the Machine controller deletes a Machine's objects only after
// the shared cache shows the Machine deleting, so a fresh read settles
// whether their absence is a deletion in progress.
func (r *Reconciler) repairMachine(ctx context.Context, s *scope, m *clusterv1.Machine, templates []*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	fresh := &clusterv1.Machine{}
	if err := r.Client.Get(ctx, client.ObjectKeyFromObject(m), fresh); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	if fresh.UID != m.UID || !fresh.DeletionTimestamp.IsZero() || ptr.Deref(fresh.Status.Initialization.InfrastructureProvisioned, false) {
		return nil, nil
	}
	// The clones get what a new Machine of the set would carry, so that a
	// repaired Machine's objects look like any other's.
	owner := newMachine(s.ms, m.Name)
	owner.UID = m.UID
	owner.Spec.ClusterName = m.Spec.ClusterName
	var made []*unstructured.Unstructured
	for _, tmpl := range templates {
		obj, err := r.clone(ctx, tmpl, owner)
		if err != nil {
			return made, err
		}
		ctrl.LoggerFrom(ctx).Info("Created a missing object of a Machine", "Machine", m.Name, "kind", obj.GetKind(), "name", obj.GetName())
		made = append(made, obj)
	}
	return made, nil
}
