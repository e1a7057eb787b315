package clusterresourceset

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	addonsv1 "capstan.dev/capstan/api/addons/v1beta2"
)

// resource is one entry of spec.resources as read for this reconcile.
type resource struct {
	ref addonsv1.ResourceRef
	// obj is the ConfigMap or Secret; nil when it does not exist.
	obj client.Object
	// hash is the digest of its data; empty when it cannot be applied.
	hash    string
	objects []*unstructured.Unstructured
	// problem says why it cannot be applied, naming it; wrongType marks a
	// Secret of another type, which has a reason of its own.
	problem   string
	wrongType bool
}

// readResource reads one resource from the API server (the manager caches
// neither ConfigMaps nor these Secrets) and parses its manifests. Only an
// unexpected read error is returned; what the user must fix goes into the
// resource's problem.
func (r *Reconciler) readResource(ctx context.Context, namespace string, ref addonsv1.ResourceRef) (*resource, error) {
	res := &resource{ref: ref}
	key := client.ObjectKey{Namespace: namespace, Name: ref.Name}
	var data map[string][]byte
	switch addonsv1.ClusterResourceSetResourceKind(ref.Kind) {
	case addonsv1.ConfigMapClusterResourceSetResourceKind:
		cm := &corev1.ConfigMap{}
		if err := r.Client.Get(ctx, key, cm); err != nil {
			return res, notFound(res, err)
		}
		res.obj = cm
		data = map[string][]byte{}
		for k, v := range cm.Data {
			data[k] = []byte(v)
		}
	case addonsv1.SecretClusterResourceSetResourceKind:
		s := &corev1.Secret{}
		if err := r.Client.Get(ctx, key, s); err != nil {
			return res, notFound(res, err)
		}
		res.obj = s
		if s.Type != addonsv1.ClusterResourceSetSecretType {
			res.problem = fmt.Sprintf("Secret %s has type %q; set its type to %s to use it", ref.Name, s.Type, addonsv1.ClusterResourceSetSecretType)
			res.wrongType = true
			return res, nil
		}
		data = s.Data
	default:
		// The API allows only the two kinds; an older object may hold another.
		res.problem = fmt.Sprintf("resource %s has kind %q; only ConfigMap and Secret are supported", ref.Name, ref.Kind)
		return res, nil
	}
	if len(data) == 0 {
		res.problem = fmt.Sprintf("%s %s has no data: add the manifests to apply as its values", ref.Kind, ref.Name)
		return res, nil
	}
	objs, err := parseData(data)
	if err != nil {
		res.problem = fmt.Sprintf("%s %s is malformed: %v", ref.Kind, ref.Name, err)
		return res, nil
	}
	res.objects, res.hash = objs, dataHash(data)
	return res, nil
}

func notFound(res *resource, err error) error {
	if apierrors.IsNotFound(err) {
		res.problem = fmt.Sprintf("%s %s does not exist", res.ref.Kind, res.ref.Name)
		return nil
	}
	return err
}

// ensureOwnedBy makes crs an owner of the resource, as Cluster API does:
// `clusterctl move` takes the resource along with the ClusterResourceSet,
// and its events find the ClusterResourceSet without a list. It writes only
// when the reference is missing.
func (r *Reconciler) ensureOwnedBy(ctx context.Context, crs *addonsv1.ClusterResourceSet, res *resource) error {
	if res.obj == nil {
		return nil
	}
	owner := metav1.OwnerReference{
		APIVersion: addonsv1.GroupVersion.String(),
		Kind:       addonsv1.ClusterResourceSetKind,
		Name:       crs.Name,
		UID:        crs.UID,
	}
	refs := res.obj.GetOwnerReferences()
	if slices.ContainsFunc(refs, func(o metav1.OwnerReference) bool { return o.UID == owner.UID }) {
		return nil
	}
	before := res.obj.DeepCopyObject().(client.Object)
	res.obj.SetOwnerReferences(append(slices.Clone(refs), owner))
	// Locked: owner references are a list others edit too.
	if err := r.Client.Patch(ctx, res.obj, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("adding ClusterResourceSet %s as owner of %s %s: %w", crs.Name, res.ref.Kind, res.ref.Name, err)
	}
	return nil
}

// secretMeta and configMapMeta are the metadata-only kinds the resource
// cache holds.
func secretMeta() *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}}
}

func configMapMeta() *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}}
}

// NewResourceCache builds the cache whose events tell the controller that a
// resource changed: the metadata of ConfigMaps and of the Secrets of type
// addons.cluster.x-k8s.io/resource-set (the API server filters by type, so
// no other Secret is ever sent), stripped to what the mapping reads. opts
// brings the manager's scheme, mapper, HTTP client and namespace and label
// restrictions. Add the cache to the manager so that it runs.
func NewResourceCache(cfg *rest.Config, opts cache.Options) (cache.Cache, error) {
	opts.ByObject = map[client.Object]cache.ByObject{
		secretMeta(): {
			Field:     fields.OneTermEqualSelector("type", string(addonsv1.ClusterResourceSetSecretType)),
			Transform: keepIdentity,
		},
		configMapMeta(): {Transform: keepIdentity},
	}
	return cache.New(cfg, opts)
}

// keepIdentity drops all of an object's metadata but what the mapping to
// ClusterResourceSets reads: ConfigMaps applied with kubectl carry their
// whole data in an annotation, which the cache must not hold.
func keepIdentity(in any) (any, error) {
	m, ok := in.(*metav1.PartialObjectMetadata)
	if !ok {
		return in, nil
	}
	return &metav1.PartialObjectMetadata{
		TypeMeta: m.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       m.Namespace,
			Name:            m.Name,
			UID:             m.UID,
			ResourceVersion: m.ResourceVersion,
			Labels:          m.Labels,
			OwnerReferences: m.OwnerReferences,
		},
	}, nil
}
