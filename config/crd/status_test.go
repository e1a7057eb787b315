package crd_test

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// minStatus is the number of status manifests the corpus holds at least.
const minStatus = 5

// The status corpus (testdata/status) holds objects with a status that uses
// the status fields controllers write. The valid corpus cannot carry them:
// the API server drops status on create. Each object is created without its
// status, then the status is written through the status subresource and
// must read back unchanged, so that a field the schema lacks (and prunes)
// fails here rather than vanishing from a controller's write.
func TestCorpusStatusIsStoredUnchanged(t *testing.T) {
	eachCorpusFile(t, "status", minStatus, func(t *testing.T, ctx context.Context, ns string, f corpusFile) {
		for _, doc := range f.docs {
			doc.SetNamespace(ns)
			status, hasStatus := doc.Object["status"]
			if !hasStatus {
				t.Fatalf("%s %s has no status: the status corpus is for status fields", doc.GetKind(), doc.GetName())
			}
			obj := doc.DeepCopy()
			delete(obj.Object, "status")
			if err := env.Client.Create(ctx, obj); err != nil {
				t.Fatalf("%s %s was refused: %v", doc.GetKind(), doc.GetName(), err)
			}
			obj.Object["status"] = status
			if err := env.Client.Status().Update(ctx, obj); err != nil {
				t.Fatalf("status of %s %s was refused: %v", doc.GetKind(), doc.GetName(), err)
			}
			got := &unstructured.Unstructured{}
			got.SetGroupVersionKind(doc.GroupVersionKind())
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(doc), got); err != nil {
				t.Fatal(err)
			}
			for _, d := range subsetDiff(".status", status, got.Object["status"]) {
				t.Errorf("%s %s: %s", doc.GetKind(), doc.GetName(), d)
			}
		}
	})
}
