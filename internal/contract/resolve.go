package contract

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gobuffalo/flect"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/patch"
	"capstan.dev/capstan/internal/usererror"
)

// CRDName is the name of the CRD that defines kind in group, as Cluster API
// derives it: the lower-cased plural of the kind, a dot, the group.
func CRDName(group, kind string) string {
	return strings.ToLower(flect.Pluralize(kind)) + "." + group
}

// Resolver turns version-less references into GroupVersionKinds by reading
// provider CRDs' contract labels. Give it a reader backed by the manager's
// cache (metadata-only is enough): resolving then costs no API call.
type Resolver struct {
	Reader client.Reader
	// Discovery, when set, answers instead of the CRD when Reader is
	// forbidden to read it (a 403, nothing else): see discoveredVersion.
	// Only views that read with a user's rights (describe, the console)
	// set it; controllers leave it nil, so that they keep resolving from
	// the contract label alone. The Resolver keeps no answers of its own:
	// what Discovery says is never taken for what a CRD says, even for a
	// Resolver shared by callers with other rights.
	Discovery meta.RESTMapper
}

// NotContractCompliantError says a CRD does not declare which of its
// versions implement the v1beta2 contract.
type NotContractCompliantError struct{ CRD string }

func (e *NotContractCompliantError) Error() string {
	return fmt.Sprintf("CRD %s has no %s label naming the versions that implement the Cluster API v1beta2 contract; install a provider release that supports v1beta2 or add the label", e.CRD, clusterv1.ContractVersionLabel)
}

// KindNotInstalledError says a reference names a kind no CRD defines.
type KindNotInstalledError struct{ Kind, Group, CRD string }

func (e *KindNotInstalledError) Error() string {
	return fmt.Sprintf("kind %s of group %s is not installed (no CRD %s): install its provider or fix the reference", e.Kind, e.Group, e.CRD)
}

// Absent tells whether err from reading a referenced object means it does
// not exist or cannot: the object is not found, no CRD defines its kind,
// or the API server serves no such kind. Deletion waits for nothing then:
// a reference to a kind that was never installed (or was removed with all
// its objects) must not hold a finalizer forever.
func Absent(err error) bool {
	var notInstalled *KindNotInstalledError
	return apierrors.IsNotFound(err) || errors.As(err, &notInstalled) || meta.IsNoMatchError(err)
}

// GroupVersionKind resolves ref to the version its CRD's contract label
// names (the newest when it names several).
func (r *Resolver) GroupVersionKind(ctx context.Context, ref clusterv1.ContractVersionedObjectReference) (schema.GroupVersionKind, error) {
	name := CRDName(ref.APIGroup, ref.Kind)
	crd := &metav1.PartialObjectMetadata{}
	crd.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
	if err := r.Reader.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
		if apierrors.IsNotFound(err) {
			return schema.GroupVersionKind{}, usererror.Mark(&KindNotInstalledError{Kind: ref.Kind, Group: ref.APIGroup, CRD: name})
		}
		if apierrors.IsForbidden(err) && r.Discovery != nil {
			return r.discoveredVersion(ref, name)
		}
		return schema.GroupVersionKind{}, fmt.Errorf("reading CRD %s: %w", name, err)
	}
	v := newestContractVersion(crd.GetLabels()[clusterv1.ContractVersionLabel])
	if v == "" {
		return schema.GroupVersionKind{}, usererror.Mark(&NotContractCompliantError{CRD: name})
	}
	return schema.GroupVersionKind{Group: ref.APIGroup, Version: v, Kind: ref.Kind}, nil
}

// discoveredVersion resolves ref from API discovery, for a caller that may
// not read CRDs but, like every signed-in user, may ask the API server
// what it serves. Discovery cannot see the contract label, so this is a
// guess, good enough to show a provider object and never to act on one:
// the served version the API server prefers for the kind. That is the newest served version in Kubernetes' version order,
// which is the label's choice whenever a provider serves the versions its
// contract label names, as providers do; a provider that still serves a
// newer version not yet labelled for the contract is read in that version.
func (r *Resolver) discoveredVersion(ref clusterv1.ContractVersionedObjectReference, crd string) (schema.GroupVersionKind, error) {
	mapping, err := r.Discovery.RESTMapping(schema.GroupKind{Group: ref.APIGroup, Kind: ref.Kind})
	if meta.IsNoMatchError(err) {
		return schema.GroupVersionKind{}, usererror.Mark(&KindNotInstalledError{Kind: ref.Kind, Group: ref.APIGroup, CRD: crd})
	}
	if err != nil {
		return schema.GroupVersionKind{}, fmt.Errorf("finding the version of %s: reading CRD %s is forbidden and API discovery failed: %w", ref.Kind, crd, err)
	}
	return mapping.GroupVersionKind, nil
}

// newestContractVersion picks the newest of the '_'-separated API versions
// of a contract label value.
func newestContractVersion(label string) string {
	newest := ""
	for _, v := range strings.Split(label, "_") {
		if v == "" {
			continue
		}
		if newest == "" || version.CompareKubeAwareVersionStrings(v, newest) > 0 {
			newest = v
		}
	}
	return newest
}

// Get reads the object ref points at, in namespace.
func (r *Resolver) Get(ctx context.Context, c client.Reader, ref clusterv1.ContractVersionedObjectReference, namespace string) (*unstructured.Unstructured, error) {
	return r.GetWatched(ctx, c, nil, ref, namespace)
}

// GetWatched reads the object ref points at, first making sure tracker's
// controller watches its kind (tracker may be nil).
func (r *Resolver) GetWatched(ctx context.Context, c client.Reader, tracker *Tracker, ref clusterv1.ContractVersionedObjectReference, namespace string) (*unstructured.Unstructured, error) {
	gvk, err := r.GroupVersionKind(ctx, ref)
	if err != nil {
		return nil, err
	}
	if tracker != nil {
		if err := tracker.Watch(gvk); err != nil {
			return nil, fmt.Errorf("watching %s: %w", gvk.Kind, err)
		}
	}
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gvk)
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.Name}, obj); err != nil {
		return nil, err
	}
	return obj, nil
}

// MissingObjectRetry is how soon an owner looks again for an object its
// reference names that does not exist yet: objects applied together with
// their owner usually appear within moments, and the new object cannot wake
// the owner through an owner reference it does not carry yet.
const MissingObjectRetry = 10 * time.Second

// RetryIfMissing is a reconcile step's answer to an error reading the object
// a reference names: a missing object is looked for again after
// MissingObjectRetry, without an error; any other error is the step's.
func RetryIfMissing(err error) (time.Duration, error) {
	if apierrors.IsNotFound(err) {
		return MissingObjectRetry, nil
	}
	return 0, err
}

// Claim reads the object ref points at (watched through tracker), lets
// claim make the caller its owner (set an owner reference, a label), and
// writes what claim changed; nothing when it changed nothing. An object
// being deleted is returned as it is: it can no longer be claimed.
func (r *Resolver) Claim(ctx context.Context, c client.Client, tracker *Tracker, ref clusterv1.ContractVersionedObjectReference, namespace string,
	claim func(*unstructured.Unstructured) error) (*unstructured.Unstructured, error) {
	obj, err := r.GetWatched(ctx, c, tracker, ref, namespace)
	if err != nil {
		return nil, err
	}
	if !obj.GetDeletionTimestamp().IsZero() {
		return obj, nil
	}
	helper, err := patch.NewHelper(obj, c)
	if err != nil {
		return nil, err
	}
	if err := claim(obj); err != nil {
		return nil, err
	}
	return obj, helper.Patch(ctx, obj)
}
