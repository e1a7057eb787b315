package install

import (
	"context"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"capstan.dev/capstan/internal/patch"
)

// Pending lists the CRDs among names (those that exist) whose stored
// objects are not all known to be in the storage version.
func Pending(ctx context.Context, c client.Client, names []string) ([]string, error) {
	var pending []string
	for _, name := range names {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return nil, fmt.Errorf("reading CRD %s: %w", name, err)
		}
		if storage := storageVersion(crd); storage != "" && !onlyStorage(crd, storage) {
			pending = append(pending, name)
		}
	}
	return pending, nil
}

func storageVersion(crd *apiextensionsv1.CustomResourceDefinition) string {
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			return v.Name
		}
	}
	return ""
}

func onlyStorage(crd *apiextensionsv1.CustomResourceDefinition, storage string) bool {
	sv := crd.Status.StoredVersions
	return len(sv) == 1 && sv[0] == storage
}

// MigrateProgress hears of each CRD Migrate finished, with how many
// objects it re-wrote.
type MigrateProgress func(crd, storage string, objects int)

// Migrate moves every stored object of the named CRDs to its CRD's storage
// version (see the package documentation). done, if not nil, is called
// after each CRD is finished.
func Migrate(ctx context.Context, c client.Client, names []string, done MigrateProgress) error {
	pending, err := Pending(ctx, c, names)
	if err != nil {
		return err
	}
	for _, name := range pending {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			return fmt.Errorf("reading CRD %s: %w", name, err)
		}
		storage := storageVersion(crd)
		n, err := rewriteAll(ctx, c, schema.GroupVersionKind{Group: crd.Spec.Group, Version: storage, Kind: crd.Spec.Names.ListKind})
		if err != nil {
			return fmt.Errorf("migrating %s to %s: %w", name, storage, err)
		}
		// Only now may the old versions leave storedVersions: every object
		// was re-written after the storage version became the one used.
		stored := patch.Merge(map[string]any{
			"metadata": map[string]any{"resourceVersion": crd.ResourceVersion},
			"status":   map[string]any{"storedVersions": []string{storage}},
		})
		if err := c.Status().Patch(ctx, crd, stored); err != nil {
			return fmt.Errorf("setting status.storedVersions of CRD %s to [%s]: %w", name, storage, err)
		}
		if done != nil {
			done(name, storage, n)
		}
	}
	return nil
}

// rewriteAll updates every object of the list kind unchanged, a page at a
// time. An object changed or deleted meanwhile needs nothing: its new
// write was encoded in the storage version already.
func rewriteAll(ctx context.Context, c client.Client, listGVK schema.GroupVersionKind) (int, error) {
	n := 0
	cont := ""
	for {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(listGVK)
		if err := c.List(ctx, list, client.Limit(250), client.Continue(cont)); err != nil {
			return n, fmt.Errorf("listing %s: %w", listGVK.Kind, err)
		}
		for i := range list.Items {
			obj := &list.Items[i]
			err := c.Update(ctx, obj, client.FieldOwner(FieldManager))
			if err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
				return n, fmt.Errorf("re-writing %s %s/%s: %w", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
			}
			n++
		}
		if cont = list.GetContinue(); cont == "" {
			return n, nil
		}
	}
}
