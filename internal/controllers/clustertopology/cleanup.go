package clustertopology

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/contract"
	"capstan.dev/capstan/internal/index"
)

// removeTemplatesNotInUse deletes the templates the topology made that
// nothing references any more: replaced by a rotation, or left by a
// MachineDeployment the topology removed. A template is in use while the
// control plane, a MachineDeployment or any MachineSet of the Cluster
// references it: a MachineSet of an earlier revision still clones the
// template it was made with until the rollout scales it away, so a
// MachineDeployment's old templates go only with its last old MachineSet
// (whose deletion wakes the Cluster).
func (r *Reconciler) removeTemplatesNotInUse(ctx context.Context, s *scope) (time.Duration, error) {
	if !s.currentRead {
		return 0, nil
	}
	inUse, err := r.templatesInUse(ctx, s)
	if err != nil {
		return 0, err
	}
	var errs []error
	for _, gvk := range templateKinds(s) {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := r.Client.List(ctx, list, client.InNamespace(s.cluster.Namespace), ownedBy(s.cluster)); err != nil {
			errs = append(errs, fmt.Errorf("listing %s: %w", gvk.Kind, err))
			continue
		}
		for i := range list.Items {
			t := &list.Items[i]
			if !t.GetDeletionTimestamp().IsZero() || inUse[templateID(gvk.Group, gvk.Kind, t.GetName())] {
				continue
			}
			ctrl.LoggerFrom(ctx).Info("deleting a template no longer in use", "kind", gvk.Kind, "name", t.GetName())
			if err := r.delete(ctx, s, t); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return 0, errors.Join(errs...)
}

// templateKinds are the template kinds the topology may have made: those
// of the class's templates and of the templates in use now.
func templateKinds(s *scope) []schema.GroupVersionKind {
	seen := map[schema.GroupKind]bool{}
	var out []schema.GroupVersionKind
	add := func(u *unstructured.Unstructured) {
		if u == nil || !strings.HasSuffix(u.GetKind(), contract.TemplateSuffix) {
			return
		}
		gvk := u.GroupVersionKind()
		if !seen[gvk.GroupKind()] {
			seen[gvk.GroupKind()] = true
			out = append(out, gvk)
		}
	}
	for _, t := range s.classTemplates {
		add(t)
	}
	add(s.current.ControlPlaneMachineInfrastructure)
	for _, md := range s.current.MachineDeployments {
		add(md.Bootstrap)
		add(md.Infrastructure)
	}
	for _, obj := range s.applied {
		add(obj)
	}
	return out
}

func templateID(group, kind, name string) string { return group + "/" + kind + "/" + name }

func refID(ref clusterv1.ContractVersionedObjectReference) string {
	return templateID(ref.APIGroup, ref.Kind, ref.Name)
}

// templatesInUse lists the templates referenced by the control plane, the
// Cluster's MachineDeployments and MachineSets (as the cache has them), and
// by what this reconcile wrote.
func (r *Reconciler) templatesInUse(ctx context.Context, s *scope) (map[string]bool, error) {
	c := s.cluster
	inUse := map[string]bool{}
	add := func(ref clusterv1.ContractVersionedObjectReference) {
		if ref.IsDefined() {
			inUse[refID(ref)] = true
		}
	}
	for _, cp := range []*unstructured.Unstructured{s.current.ControlPlane} {
		if cp == nil {
			continue
		}
		ref, err := contract.ControlPlaneMachineTemplateRef(cp)
		if err != nil {
			return nil, err
		}
		add(ref)
	}
	for _, obj := range s.applied {
		if ref, err := contract.ControlPlaneMachineTemplateRef(obj); err == nil {
			add(ref)
		}
		for _, path := range [][]string{
			{"spec", "template", "spec", "infrastructureRef"},
			{"spec", "template", "spec", "bootstrap", "configRef"},
		} {
			m, _, _ := unstructured.NestedStringMap(obj.Object, path...)
			add(clusterv1.ContractVersionedObjectReference{APIGroup: m["apiGroup"], Kind: m["kind"], Name: m["name"]})
		}
	}
	deployments := &clusterv1.MachineDeploymentList{}
	if err := r.Client.List(ctx, deployments, index.InCluster(c.Namespace, c.Name)...); err != nil {
		return nil, err
	}
	for i := range deployments.Items {
		spec := &deployments.Items[i].Spec.Template.Spec
		add(spec.InfrastructureRef)
		add(spec.Bootstrap.ConfigRef)
	}
	sets := &clusterv1.MachineSetList{}
	if err := r.Client.List(ctx, sets, index.InCluster(c.Namespace, c.Name)...); err != nil {
		return nil, err
	}
	for i := range sets.Items {
		spec := &sets.Items[i].Spec.Template.Spec
		add(spec.InfrastructureRef)
		add(spec.Bootstrap.ConfigRef)
	}
	return inUse, nil
}

// reconcileDelete takes down what the Cluster controller's deletion does
// not: the topology's MachineHealthChecks at once (nothing is to be
// remediated while the cluster goes), and its templates as the objects that
// reference them go. The Cluster controller deletes the workers, the
// control plane and the infrastructure cluster in its order; the templates
// still referenced when the Cluster itself goes follow it through their
// owner reference to it.
func (r *Reconciler) reconcileDelete(ctx context.Context, s *scope) (ctrl.Result, error) {
	c := s.cluster
	checks := &clusterv1.MachineHealthCheckList{}
	if err := r.Client.List(ctx, checks, client.InNamespace(c.Namespace), ownedBy(c)); err != nil {
		return ctrl.Result{}, err
	}
	var errs []error
	for i := range checks.Items {
		if mhc := &checks.Items[i]; mhc.DeletionTimestamp.IsZero() {
			errs = append(errs, r.delete(ctx, s, mhc))
		}
	}
	// The class may be gone already; what exists names the template kinds.
	if class, err := r.readClass(ctx, c); err == nil && class != nil {
		s.class = class
		s.classTemplates, _ = r.classTemplates(ctx, class)
	}
	if err := r.readCurrent(ctx, s); err != nil {
		return ctrl.Result{}, errors.Join(append(errs, err)...)
	}
	s.currentRead = true
	if _, err := r.removeTemplatesNotInUse(ctx, s); err != nil {
		errs = append(errs, err)
	}
	s.deleting = "the Cluster controller deletes the workers, the control plane and the infrastructure cluster; the topology's templates follow as nothing references them"
	return ctrl.Result{}, errors.Join(errs...)
}
