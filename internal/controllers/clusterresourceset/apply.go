package clusterresourceset

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	addonsv1 "capstan.dev/capstan/api/addons/v1beta2"
)

// FieldManager names this controller's server-side apply ownership of what
// it applies to workload clusters under the Reconcile strategy.
const FieldManager = "capstan-clusterresourceset"

// applyResource creates one resource's objects in a workload cluster: under
// ApplyOnce by create, leaving alone what exists already; under Reconcile by
// server-side apply, taking over the fields the manifests set. Every object
// is tried; the error names each that failed.
func applyResource(ctx context.Context, c client.Client, strategy addonsv1.ClusterResourceSetStrategy, objs []*unstructured.Unstructured) error {
	var errs []error
	for _, o := range objs {
		obj := o.DeepCopy()
		if err := defaultNamespace(c, obj); err != nil {
			errs = append(errs, fmt.Errorf("%s %s: %w", obj.GetKind(), obj.GetName(), err))
			continue
		}
		var err error
		if strategy == addonsv1.ClusterResourceSetStrategyReconcile {
			err = c.Patch(ctx, obj, client.Apply, client.FieldOwner(FieldManager), client.ForceOwnership)
		} else if err = c.Create(ctx, obj); apierrors.IsAlreadyExists(err) {
			err = nil
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s %s: %w", obj.GetKind(), objectName(obj), err))
		}
	}
	return kerrors.NewAggregate(errs)
}

// defaultNamespace puts a namespaced object without a namespace into
// "default", as kubectl does.
func defaultNamespace(c client.Client, obj *unstructured.Unstructured) error {
	if obj.GetNamespace() != "" {
		return nil
	}
	namespaced, err := c.IsObjectNamespaced(obj)
	if err != nil {
		return err
	}
	if namespaced {
		obj.SetNamespace("default")
	}
	return nil
}

func objectName(obj client.Object) string {
	if obj.GetNamespace() == "" {
		return obj.GetName()
	}
	return obj.GetNamespace() + "/" + obj.GetName()
}
