package machineset

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/conditions"
	"capstan.dev/capstan/internal/contract"
	"capstan.dev/capstan/internal/index"
	"capstan.dev/capstan/internal/patch"
)

// controllerRef makes ms the controller of an object it creates or adopts.
func controllerRef(ms *clusterv1.MachineSet) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion: clusterv1.GroupVersion.String(), Kind: clusterv1.MachineSetKind,
		Name: ms.Name, UID: ms.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	}
}

// machineLabels are the labels every Machine of ms carries: the template's,
// and Cluster API's names of the cluster, the set and its deployment.
func machineLabels(ms *clusterv1.MachineSet) map[string]string {
	labels := maps.Clone(ms.Spec.Template.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[clusterv1.ClusterNameLabel] = ms.Spec.ClusterName
	labels[clusterv1.MachineSetNameLabel] = contract.LabelValue(ms.Name)
	if md, ok := ms.Labels[clusterv1.MachineDeploymentNameLabel]; ok {
		labels[clusterv1.MachineDeploymentNameLabel] = md
	}
	return labels
}

func (r *Reconciler) readMachines(ctx context.Context, s *scope) (time.Duration, error) {
	return 0, r.listMachines(ctx, s, true)
}

// listMachines finds the set's Machines in the cache: those its selector
// matches that it controls and, when adopt is set, those nobody controls
// that belong to the same cluster and are not being deleted.
func (r *Reconciler) listMachines(ctx context.Context, s *scope, adopt bool) error {
	ms := s.ms
	sel, err := metav1.LabelSelectorAsSelector(&ms.Spec.Selector)
	if err != nil {
		return fmt.Errorf("spec.selector: %w", err)
	}
	if sel.Empty() {
		// An empty selector would match every Machine; it matches none.
		s.machinesRead = true
		return nil
	}
	list := &clusterv1.MachineList{}
	if err := r.Client.List(ctx, list, append(index.InCluster(ms.Namespace, ms.Spec.ClusterName), client.MatchingLabelsSelector{Selector: sel})...); err != nil {
		return err
	}
	s.adopt = map[string]bool{}
	for i := range list.Items {
		m := &list.Items[i]
		owner := metav1.GetControllerOf(m)
		switch {
		case owner != nil && owner.UID == ms.UID:
		case owner != nil:
			continue
		case !adopt || m.Spec.ClusterName != ms.Spec.ClusterName || !m.DeletionTimestamp.IsZero():
			continue
		default:
			s.adopt[m.Name] = true
		}
		s.machines = append(s.machines, m)
	}
	s.machinesRead = true
	return nil
}

// syncMachines adopts orphans, propagates the template's labels,
// annotations and in-place fields to existing Machines, and sets each
// Machine's UpToDate condition; nothing is written for a Machine that is
// already right.
func (r *Reconciler) syncMachines(ctx context.Context, s *scope) (time.Duration, error) {
	if !s.machinesRead {
		return 0, nil
	}
	var errs []error
	var recheck time.Duration
	for _, m := range s.machines {
		if err := r.syncMachine(ctx, s, m); err != nil {
			errs = append(errs, err)
			continue
		}
		if s.adopt[m.Name] {
			r.event(s.ms, m, "Normal", "SuccessfulAdopt", "Adopt", "Adopted Machine %s", m.Name)
		}
		after, err := r.setUpToDate(ctx, s, m)
		if err != nil {
			errs = append(errs, err)
		}
		if after > 0 && (recheck == 0 || after < recheck) {
			recheck = after
		}
	}
	return recheck, kerrors.NewAggregate(errs)
}

// setUpToDate writes a Machine's UpToDate condition when it changed; see
// upToDate for the rule.
func (r *Reconciler) setUpToDate(ctx context.Context, s *scope, m *clusterv1.Machine) (time.Duration, error) {
	if s.md == nil && isDeploymentChild(s.ms) {
		// The deployment that judges these Machines is gone.
		return 0, nil
	}
	cond, after := upToDate(s.ms, s.md, s.now)
	if err := conditions.ApplyPaced(ctx, r.Client, r.pacer, m, clusterv1.GroupVersion.WithKind(clusterv1.MachineKind), cond, FieldManager, s.now); err != nil {
		return after, fmt.Errorf("setting UpToDate on Machine %s: %w", m.Name, err)
	}
	return after, nil
}

func (r *Reconciler) syncMachine(ctx context.Context, s *scope, m *clusterv1.Machine) error {
	helper, err := patch.NewHelper(m, r.writer())
	if err != nil {
		return err
	}
	tmpl := &s.ms.Spec.Template
	if s.adopt[m.Name] {
		m.OwnerReferences = append(m.OwnerReferences, controllerRef(s.ms))
	}
	if m.DeletionTimestamp.IsZero() {
		m.Labels = propagate(m.Labels, machineLabels(s.ms), ownedKeys(m, FieldManager, "labels"))
		m.Annotations = propagate(m.Annotations, tmpl.Annotations, ownedKeys(m, FieldManager, "annotations"))
		m.Spec.MinReadySeconds = tmpl.Spec.MinReadySeconds
		m.Spec.ReadinessGates = tmpl.Spec.ReadinessGates
	}
	// Deletion timeouts matter most to a Machine being deleted: raising one
	// can free a stuck drain. Taints reach a deleting Machine too, as
	// upstream's do: its Node is still up while it drains, and a taint is
	// how a user keeps new pods off it meanwhile.
	m.Spec.Deletion = tmpl.Spec.Deletion
	m.Spec.Taints = tmpl.Spec.Taints
	if err := helper.Patch(ctx, m); err != nil {
		return fmt.Errorf("updating Machine %s: %w", m.Name, err)
	}
	return nil
}

// propagate returns current with every key of desired set to its value and
// every key in owned (put there earlier by this controller) that desired no
// longer has removed. Keys others set stay.
func propagate(current, desired map[string]string, owned map[string]bool) map[string]string {
	out := maps.Clone(current)
	if out == nil {
		out = map[string]string{}
	}
	for k := range owned {
		if _, ok := desired[k]; !ok {
			delete(out, k)
		}
	}
	maps.Copy(out, desired)
	if len(out) == 0 {
		return nil
	}
	return out
}

// patchMachineStatus writes a change of a Machine's status that mutate
// makes, guarded by the Machine's resourceVersion: the merge patch replaces
// the whole condition list, so it must not overwrite a newer one.
func (r *Reconciler) patchMachineStatus(ctx context.Context, m *clusterv1.Machine, mutate func(*clusterv1.Machine)) error {
	before := m.DeepCopy()
	mutate(m)
	if reflect.DeepEqual(before.Status, m.Status) {
		return nil
	}
	if err := r.writer().Status().Patch(ctx, m, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("updating status of Machine %s: %w", m.Name, err)
	}
	return nil
}

// leftoverGrace is how old a cloned object without a Machine must be before
// it counts as left over: younger ones may belong to a Machine the cache has
// not shown yet.
const leftoverGrace = 5 * time.Second

// reconcileLeftoverClones deletes infrastructure and bootstrap objects the
// set controls although their Machine does not exist. Capstan now creates
// the Machine first and its objects owned by it (the garbage collector takes
// those with the Machine), but earlier versions cloned first, with the set
// as controller until the Machine controller took over: a manager stopped
// between cloning and creating the Machine, or a Machine gone before the
// takeover, left such objects behind.
func (r *Reconciler) reconcileLeftoverClones(ctx context.Context, s *scope) (time.Duration, error) {
	if !s.machinesRead {
		return 0, nil
	}
	var templates []*unstructured.Unstructured
	for _, t := range []*unstructured.Unstructured{s.infraTemplate, s.bootstrapTemplate} {
		if t != nil {
			templates = append(templates, t)
		}
	}
	var errs []error
	var recheck time.Duration
	for _, t := range templates {
		gvk, err := r.Resolver.GroupVersionKind(ctx, clusterv1.ContractVersionedObjectReference{
			APIGroup: t.GroupVersionKind().Group, Kind: strings.TrimSuffix(t.GetKind(), contract.TemplateSuffix), Name: "any",
		})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		// Scanning every clone of the namespace by label on every reconcile
		// was a fifth of the manager's CPU at a thousand clusters.
		kind := &unstructured.Unstructured{}
		kind.SetGroupVersionKind(gvk)
		if err := index.ByMachineSetName(ctx, r.indexer, kind); err != nil {
			errs = append(errs, err)
			continue
		}
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := r.clones.List(ctx, list, client.InNamespace(s.ms.Namespace), client.MatchingFields{index.MachineSetName: contract.LabelValue(s.ms.Name)}); err != nil {
			errs = append(errs, err)
			continue
		}
		for i := range list.Items {
			obj := &list.Items[i]
			if owner := metav1.GetControllerOf(obj); owner == nil || owner.UID != s.ms.UID || !obj.GetDeletionTimestamp().IsZero() {
				continue
			}
			if age := s.now.Sub(obj.GetCreationTimestamp().Time); age < leftoverGrace {
				if wait := leftoverGrace - age; recheck == 0 || wait < recheck {
					recheck = wait
				}
				continue
			}
			err := r.Client.Get(ctx, client.ObjectKey{Namespace: obj.GetNamespace(), Name: obj.GetName()}, &clusterv1.Machine{})
			if !apierrors.IsNotFound(err) {
				if err != nil {
					errs = append(errs, err)
				}
				continue
			}
			if err := r.Client.Delete(ctx, obj, client.Preconditions{UID: ptr.To(obj.GetUID())}); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("deleting left-over %s %s: %w", obj.GetKind(), obj.GetName(), err))
				continue
			}
			ctrl.LoggerFrom(ctx).Info("Deleted a cloned object whose Machine does not exist", "kind", obj.GetKind(), "name", obj.GetName())
		}
	}
	return recheck, kerrors.NewAggregate(errs)
}
