package contract

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

// crdReader answers every Get of a CRD with err, or else with a CRD whose
// contract label is label.
type crdReader struct {
	label string
	err   error
}

func (r crdReader) Get(_ context.Context, _ client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	if r.err != nil {
		return r.err
	}
	obj.SetLabels(map[string]string{clusterv1.ContractVersionLabel: r.label})
	return nil
}

func (crdReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return errors.New("resolving lists nothing")
}

// brokenDiscovery fails as an unreachable API server would.
type brokenDiscovery struct{ meta.RESTMapper }

func (brokenDiscovery) RESTMapping(schema.GroupKind, ...string) (*meta.RESTMapping, error) {
	return nil, errors.New("connection refused")
}

// TestResolverDiscoveryFallback: discovery answers only when reading the
// CRD is forbidden; the CRD's label wins whenever it can be read, and a
// CRD that is absent or unreadable for another reason is never guessed
// around.
func TestResolverDiscoveryFallback(t *testing.T) {
	const group = "infrastructure.example.com"
	ref := clusterv1.ContractVersionedObjectReference{APIGroup: group, Kind: "ExampleMachine", Name: "m"}
	crd := schema.GroupResource{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"}
	forbidden := apierrors.NewForbidden(crd, CRDName(group, "ExampleMachine"), errors.New("viewer may not get CRDs"))
	// Discovery prefers v1beta2 while the contract label names only
	// v1beta1, so every answer tells which of the two was asked.
	discovery := meta.NewDefaultRESTMapper([]schema.GroupVersion{{Group: group, Version: "v1beta2"}, {Group: group, Version: "v1beta1"}})
	for _, v := range []string{"v1beta1", "v1beta2"} {
		discovery.Add(schema.GroupVersionKind{Group: group, Version: v, Kind: "ExampleMachine"}, meta.RESTScopeNamespace)
	}
	unknownKind := ref
	unknownKind.Kind = "OtherMachine"

	for _, tc := range []struct {
		name      string
		reader    crdReader
		discovery meta.RESTMapper
		ref       clusterv1.ContractVersionedObjectReference
		version   string
		check     func(error) bool
	}{
		{name: "readable CRD: its label, not discovery", reader: crdReader{label: "v1beta1"}, discovery: discovery, ref: ref, version: "v1beta1"},
		{name: "forbidden CRD: discovery's preferred version", reader: crdReader{err: forbidden}, discovery: discovery, ref: ref, version: "v1beta2"},
		{name: "forbidden CRD without discovery: the 403", reader: crdReader{err: forbidden}, ref: ref, check: apierrors.IsForbidden},
		{name: "absent CRD: not installed, no guess", reader: crdReader{err: apierrors.NewNotFound(crd, "x")}, discovery: discovery, ref: ref, check: Absent},
		{name: "other failure: the error, no guess", reader: crdReader{err: apierrors.NewInternalError(errors.New("etcd"))}, discovery: discovery, ref: ref, check: apierrors.IsInternalError},
		{name: "forbidden CRD, kind not served: not installed", reader: crdReader{err: forbidden}, discovery: discovery, ref: unknownKind, check: Absent},
		{name: "forbidden CRD, discovery fails: says both", reader: crdReader{err: forbidden}, discovery: brokenDiscovery{}, ref: ref, check: func(err error) bool {
			return strings.Contains(err.Error(), "forbidden and API discovery failed: connection refused") && !Absent(err)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Resolver{Reader: tc.reader, Discovery: tc.discovery}
			gvk, err := r.GroupVersionKind(context.Background(), tc.ref)
			if tc.check != nil {
				if err == nil || !tc.check(err) {
					t.Fatalf("got %v, %v; want the error the case names", gvk, err)
				}
				return
			}
			want := schema.GroupVersionKind{Group: group, Version: tc.version, Kind: tc.ref.Kind}
			if err != nil || gvk != want {
				t.Fatalf("got %v, %v; want %v", gvk, err, want)
			}
		})
	}
}

func TestRetryIfMissing(t *testing.T) {
	notFound := apierrors.NewNotFound(schema.GroupResource{Group: "infrastructure.cluster.x-k8s.io", Resource: "localclusters"}, "c")
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "s", errors.New("no"))
	tests := []struct {
		name      string
		err       error
		wantAfter time.Duration
		wantErr   error
	}{
		{"missing object: look again later, no error", notFound, MissingObjectRetry, nil},
		{"other error: the step's error", forbidden, 0, forbidden},
		{"wrapped missing object", errors.Join(errors.New("reading"), notFound), MissingObjectRetry, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			after, err := RetryIfMissing(tt.err)
			if after != tt.wantAfter || !errors.Is(err, tt.wantErr) {
				t.Errorf("RetryIfMissing(%v) = %v, %v; want %v, %v", tt.err, after, err, tt.wantAfter, tt.wantErr)
			}
		})
	}
}
