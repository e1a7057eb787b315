package mgmt

import (
	"context"
	"net/http"
	"path"
	"slices"
	"sync"
	"testing"
	"time"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"capstan.dev/capstan/config/crd"
	"capstan.dev/capstan/internal/testenv"
)

// A start applies only the CRDs that are not as this build wants them:
// none on a plane that has them all, the one someone else edited, the one
// whose digest is gone.
func TestInstallCRDsAppliesOnlyWhatChanged(t *testing.T) {
	env := startPlane(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	api := apiextensionsclient.NewForConfigOrDie(env.Config).ApiextensionsV1().CustomResourceDefinitions()
	versions := func() map[string]string {
		t.Helper()
		list, err := api.List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, c := range list.Items {
			out[c.Name] = c.ResourceVersion
		}
		return out
	}
	ours, err := crd.All()
	if err != nil {
		t.Fatal(err)
	}
	// An apply that changes nothing keeps the resourceVersion, so the
	// applies are counted as they leave, by the CRD they name.
	var (
		mu      sync.Mutex
		applied []string
	)
	counting := rest.CopyConfig(env.Config)
	counting.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if r.Method == http.MethodPatch {
				mu.Lock()
				applied = append(applied, path.Base(r.URL.Path))
				mu.Unlock()
			}
			return rt.RoundTrip(r)
		})
	})
	install := func() map[string]string {
		t.Helper()
		applied = nil
		before := versions()
		if err := InstallCRDs(ctx, counting); err != nil {
			t.Fatal(err)
		}
		after := versions()
		written := map[string]string{}
		for _, c := range ours {
			if before[c.Name] != after[c.Name] {
				written[c.Name] = after[c.Name]
			}
		}
		for _, name := range applied {
			if _, ok := written[name]; !ok {
				written[name] = "applied, unchanged"
			}
		}
		return written
	}

	if written := install(); len(written) != 0 {
		t.Errorf("on a plane that has every CRD, InstallCRDs wrote %v", written)
	}

	const edited = "clusters.cluster.x-k8s.io"
	patch := []byte(`{"spec":{"names":{"categories":["someone-elses"]}}}`)
	if _, err := api.Patch(ctx, edited, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "someone-else"}); err != nil {
		t.Fatal(err)
	}
	if written := install(); len(written) != 1 || written[edited] == "" {
		t.Errorf("after someone else edited %s, InstallCRDs wrote %v, want that CRD alone", edited, written)
	}
	got, err := api.Get(ctx, edited, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range ours {
		if c.Name == edited && !slices.Equal(got.Spec.Names.Categories, c.Spec.Names.Categories) {
			t.Errorf("%s categories %v after InstallCRDs, want this build's %v", edited, got.Spec.Names.Categories, c.Spec.Names.Categories)
		}
	}
	if written := install(); len(written) != 0 {
		t.Errorf("once %s was put back, InstallCRDs wrote %v", edited, written)
	}

	const undigested = "machines.cluster.x-k8s.io"
	patch = []byte(`{"metadata":{"annotations":{"` + crdDigestAnnotation + `":null}}}`)
	if _, err := api.Patch(ctx, undigested, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: fieldManager}); err != nil {
		t.Fatal(err)
	}
	if written := install(); len(written) != 1 || written[undigested] == "" {
		t.Errorf("after %s lost its digest, InstallCRDs wrote %v, want that CRD alone", undigested, written)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// startPlane starts a management plane of the test's own, stopped when the
// test ends; under -short the test is skipped instead.
func startPlane(t *testing.T) *testenv.Env {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a management plane")
	}
	env, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(env.Stop)
	return env
}
