package install_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterctlv1 "capstan.dev/capstan/api/clusterctl/v1alpha3"
	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/deploy"
	"capstan.dev/capstan/internal/install"
	"capstan.dev/capstan/internal/testenv"
	"capstan.dev/capstan/internal/webhook"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

const testGroup = "migrate.test.capstan.dev"

// twoVersionCRD is a namespaced kind served as v1alpha1 and v1, stored as
// storage.
func twoVersionCRD(plural, kind, storage string) *apiextensionsv1.CustomResourceDefinition {
	schemaProps := &apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
		"spec": {Type: "object", XPreserveUnknownFields: ptr.To(true)},
	}}
	version := func(name string) apiextensionsv1.CustomResourceDefinitionVersion {
		return apiextensionsv1.CustomResourceDefinitionVersion{
			Name: name, Served: true, Storage: name == storage,
			Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: schemaProps},
		}
	}
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + testGroup},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: testGroup, Scope: apiextensionsv1.NamespaceScoped,
			Names:    apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Kind: kind, ListKind: kind + "List", Singular: strings.ToLower(kind)},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{version("v1alpha1"), version("v1")},
		},
	}
}

func getCRD(t *testing.T, name string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Name: name}, crd); err != nil {
		t.Fatal(err)
	}
	return crd
}

// setupOldStorage creates the CRD storing v1alpha1, n objects stored so,
// then makes v1 the storage version: storedVersions lists both.
func setupOldStorage(t *testing.T, ns, plural, kind string, n int) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	ctx := context.Background()
	crd := twoVersionCRD(plural, kind, "v1alpha1")
	if err := env.Client.Create(ctx, crd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), crd) })
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		o := newObj(ns, kind, "v1alpha1", "probe")
		if err := env.Client.Create(ctx, o); err != nil {
			return false, nil
		}
		return true, env.Client.Delete(ctx, o)
	})
	if err != nil {
		t.Fatalf("CRD %s never served: %v", crd.Name, err)
	}
	for i := 0; i < n; i++ {
		if err := env.Client.Create(ctx, newObj(ns, kind, "v1alpha1", fmt.Sprintf("old-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	crd = getCRD(t, crd.Name)
	crd.Spec.Versions[0].Storage, crd.Spec.Versions[1].Storage = false, true
	if err := env.Client.Update(ctx, crd); err != nil {
		t.Fatal(err)
	}
	crd = getCRD(t, crd.Name)
	if got := crd.Status.StoredVersions; len(got) != 2 {
		t.Fatalf("storedVersions %v, want both versions before the migration", got)
	}
	return crd
}

func newObj(ns, kind, version, name string) *unstructured.Unstructured {
	o := &unstructured.Unstructured{}
	o.SetGroupVersionKind(schema.GroupVersionKind{Group: testGroup, Version: version, Kind: kind})
	o.SetNamespace(ns)
	o.SetName(name)
	o.Object["spec"] = map[string]any{"size": int64(3)}
	return o
}

// resourceVersions maps each object's name to its resourceVersion.
func resourceVersions(t *testing.T, ns, kind string) map[string]string {
	t.Helper()
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(schema.GroupVersionKind{Group: testGroup, Version: "v1", Kind: kind + "List"})
	if err := env.Client.List(context.Background(), list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, o := range list.Items {
		out[o.GetName()] = o.GetResourceVersion()
	}
	return out
}

// A migration re-writes the objects stored in an old version (and only
// those: an object already in the storage version is not written), trims
// storedVersions, and when interrupted after the first CRD, finishes the
// rest on the next run without re-doing the first.
func TestMigrateRewritesOldObjectsAndResumes(t *testing.T) {
	ns := env.Namespace(t)
	suffix := ns[len(ns)-6:]
	ctx := context.Background()
	first := setupOldStorage(t, ns, "widgets"+suffix, "Widget"+suffix, 3)
	second := setupOldStorage(t, ns, "gadgets"+suffix, "Gadget"+suffix, 2)
	// Written after the switch: stored as v1 already.
	if err := env.Client.Create(ctx, newObj(ns, "Widget"+suffix, "v1", "new")); err != nil {
		t.Fatal(err)
	}
	names := []string{first.Name, second.Name}
	pending, err := install.Pending(ctx, env.Client, names)
	if err != nil || len(pending) != 2 {
		t.Fatalf("Pending = %v, %v; want both CRDs", pending, err)
	}
	widgetsBefore := resourceVersions(t, ns, "Widget"+suffix)
	gadgetsBefore := resourceVersions(t, ns, "Gadget"+suffix)

	// Interrupted after the first CRD.
	cctx, cancel := context.WithCancel(ctx)
	var finished []string
	err = install.Migrate(cctx, env.Client, names, func(crd, storage string, n int) {
		finished = append(finished, fmt.Sprintf("%s:%s:%d", crd, storage, n))
		cancel()
	})
	if err == nil {
		t.Fatal("Migrate with its context cancelled after the first CRD reported success")
	}
	if want := first.Name + ":v1:4"; len(finished) != 1 || finished[0] != want {
		t.Fatalf("finished %v, want [%s]", finished, want)
	}
	if sv := getCRD(t, first.Name).Status.StoredVersions; len(sv) != 1 || sv[0] != "v1" {
		t.Errorf("%s storedVersions = %v, want [v1]", first.Name, sv)
	}
	if sv := getCRD(t, second.Name).Status.StoredVersions; len(sv) != 2 {
		t.Errorf("%s storedVersions = %v, want untouched", second.Name, sv)
	}
	widgetsAfter := resourceVersions(t, ns, "Widget"+suffix)
	for name, rv := range widgetsBefore {
		changed := widgetsAfter[name] != rv
		if wantChanged := name != "new"; changed != wantChanged {
			t.Errorf("Widget %s re-written = %v, want %v (only objects stored as v1alpha1 need a write)", name, changed, wantChanged)
		}
	}

	// Resumed: the second CRD is done, the first is not touched again.
	finished = nil
	if err := install.Migrate(ctx, env.Client, names, func(crd, storage string, n int) {
		finished = append(finished, crd)
	}); err != nil {
		t.Fatal(err)
	}
	if len(finished) != 1 || finished[0] != second.Name {
		t.Errorf("resumed migration finished %v, want only %s", finished, second.Name)
	}
	if sv := getCRD(t, second.Name).Status.StoredVersions; len(sv) != 1 || sv[0] != "v1" {
		t.Errorf("%s storedVersions = %v, want [v1]", second.Name, sv)
	}
	for name, rv := range resourceVersions(t, ns, "Widget"+suffix) {
		if widgetsAfter[name] != rv {
			t.Errorf("Widget %s was re-written again by the resumed migration", name)
		}
	}
	for name, rv := range resourceVersions(t, ns, "Gadget"+suffix) {
		if gadgetsBefore[name] == rv {
			t.Errorf("Gadget %s was not re-written", name)
		}
	}
	if pending, err := install.Pending(ctx, env.Client, names); err != nil || len(pending) != 0 {
		t.Errorf("Pending after the migration = %v, %v; want none", pending, err)
	}
}

// Applying the installation records its version; the plan against the same
// objects is empty (server defaults are no difference), and against another
// version names the image change; Wait sees the CRDs established and
// explains on timeout that the Deployment is not available (this plane runs
// no Deployment controller).
func TestApplyPlanAndWait(t *testing.T) {
	ctx := context.Background()
	objs, err := deploy.Objects(deploy.Options{Image: deploy.Image("v9.0.0"), Version: "v9.0.0"})
	if err != nil {
		t.Fatal(err)
	}
	if in, err := install.Inspect(ctx, env.Client); err != nil || in.Found {
		t.Fatalf("Inspect before install = %+v, %v; want nothing found", in, err)
	}
	if err := install.Apply(ctx, env.Client, objs); err != nil {
		t.Fatal(err)
	}
	in, err := install.Inspect(ctx, env.Client)
	if err != nil || !in.Found || in.Version != "v9.0.0" || in.Image != deploy.Image("v9.0.0") {
		t.Fatalf("Inspect = %+v, %v; want v9.0.0 found", in, err)
	}
	plan, err := install.MakePlan(ctx, env.Client, objs, "v9.0.0")
	if err != nil {
		t.Fatal(err)
	}
	if !plan.UpToDate() {
		t.Errorf("plan against the installed objects = %+v, want up to date", plan)
	}
	next, err := deploy.Objects(deploy.Options{Image: deploy.Image("v9.1.0"), Version: "v9.1.0"})
	if err != nil {
		t.Fatal(err)
	}
	plan, err = install.MakePlan(ctx, env.Client, next, "v9.1.0")
	if err != nil {
		t.Fatal(err)
	}
	if plan.UpToDate() || plan.From != "v9.0.0" || plan.ToImage != deploy.Image("v9.1.0") || len(plan.ChangedCRDs) != 0 {
		t.Errorf("plan to v9.1.0 = %+v, want only the version and image to change", plan)
	}

	var out bytes.Buffer
	err = install.Wait(ctx, env.Client, install.CRDNames(objs), &out, 3*time.Second)
	if err == nil {
		t.Fatalf("Wait succeeded without a Deployment controller; output:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "Deployment capstan-system/capstan-manager to be available") ||
		!strings.Contains(err.Error(), "no Pods") {
		t.Errorf("Wait output:\n%s\nerror: %v\nwant the Deployment named as what is awaited, and the missing Pods in the error", out.String(), err)
	}
	if strings.Contains(err.Error(), "CRDs not established") {
		t.Errorf("Wait error names CRDs as not established: %v", err)
	}
}

// Delete refuses to take the CRDs while Clusters exist, naming where they
// are; without the CRDs it removes the namespace and RBAC and keeps them.
func TestDeleteKeepsCRDsAndRefusesWhileClustersExist(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	objs, err := deploy.Objects(deploy.Options{Image: deploy.Image("v9.0.0"), Version: "v9.0.0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := install.Apply(ctx, env.Client, objs); err != nil {
		t.Fatal(err)
	}
	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c1"}, Spec: clusterv1.ClusterSpec{Paused: ptr.To(true)}}
	if err := env.Client.Create(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err = install.Delete(ctx, env.Client, objs, install.DeleteOptions{IncludeCRDs: true, Timeout: time.Minute, Out: &out})
	if err == nil || !strings.Contains(err.Error(), "1 in "+ns) || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("Delete with CRDs while a Cluster exists = %v; want a refusal naming 1 in %s and --force", err, ns)
	}
	if in, err := install.Inspect(ctx, env.Client); err != nil || !in.Found {
		t.Fatalf("a refused Delete removed something: %+v, %v", in, err)
	}
	// The installation ships the webhook configurations its manager fills in.
	for _, cfg := range webhook.Configurations() {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cfg), cfg); err != nil {
			t.Fatalf("%s after Apply: %v", cfg.GetName(), err)
		}
	}
	if err := install.Delete(ctx, env.Client, objs, install.DeleteOptions{Timeout: time.Minute, Out: &out}); err != nil {
		t.Fatal(err)
	}
	if in, err := install.Inspect(ctx, env.Client); err != nil || in.Found {
		t.Errorf("after Delete: %+v, %v; want nothing installed", in, err)
	}
	for _, cfg := range webhook.Configurations() {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cfg), cfg); !apierrors.IsNotFound(err) {
			t.Errorf("%s after Delete: %v; want it gone, or nobody serves the webhooks it names", cfg.GetName(), err)
		}
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cluster), cluster); err != nil {
		t.Errorf("the Cluster after Delete without CRDs: %v", err)
	}
}

// init and upgrade apply record the installation in clusterctl's inventory
// in capstan-system: the core and kubeadm providers, the local one when the
// manager runs it; an unchanged installation writes nothing, a new version
// updates the entries and a provider no longer run is removed.
func TestRecordProvidersAtInitAndUpgrade(t *testing.T) {
	ctx := context.Background()
	opts := deploy.Options{Image: deploy.Image("v9.0.0"), Version: "v9.0.0", LocalDir: t.TempDir()}
	objs, err := deploy.Objects(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = install.Delete(context.Background(), env.Client, objs, install.DeleteOptions{Timeout: time.Minute, Out: io.Discard})
	})
	if err := install.Apply(ctx, env.Client, objs); err != nil {
		t.Fatal(err)
	}
	if _, err := install.RecordProviders(ctx, env.Client, opts, "v9.0.0", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"cluster-api": "v9.0.0", "bootstrap-kubeadm": "v9.0.0", "control-plane-kubeadm": "v9.0.0", "infrastructure-local": "v9.0.0"}
	if got := inventoryVersions(t); !maps.Equal(got, want) {
		t.Errorf("inventory after init = %v, want %v", got, want)
	}
	if res, err := install.RecordProviders(ctx, env.Client, opts, "v9.0.0", 30*time.Second); err != nil || res.Changed() {
		t.Errorf("recording the same installation again = %+v, %v; want no write", res, err)
	}

	next := deploy.Options{Image: deploy.Image("v9.1.0"), Version: "v9.1.0"}
	if objs, err = deploy.Objects(next); err != nil {
		t.Fatal(err)
	}
	if err := install.Apply(ctx, env.Client, objs); err != nil {
		t.Fatal(err)
	}
	res, err := install.RecordProviders(ctx, env.Client, next, "v9.1.0", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Updated) != 3 || !slices.Equal(res.Deleted, []string{"infrastructure-local"}) || len(res.Created) != 0 {
		t.Errorf("recording the upgrade = %+v, want 3 updated and infrastructure-local removed", res)
	}
	want = map[string]string{"cluster-api": "v9.1.0", "bootstrap-kubeadm": "v9.1.0", "control-plane-kubeadm": "v9.1.0"}
	if got := inventoryVersions(t); !maps.Equal(got, want) {
		t.Errorf("inventory after upgrade = %v, want %v", got, want)
	}
}

// inventoryVersions maps the Provider objects in capstan-system to their
// versions.
func inventoryVersions(t *testing.T) map[string]string {
	t.Helper()
	list := &clusterctlv1.ProviderList{}
	if err := env.Client.List(context.Background(), list, client.InNamespace(deploy.Namespace)); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range list.Items {
		out[p.Name] = p.Version
	}
	return out
}
