package clusterresourceset_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	addonsv1 "capstan.dev/capstan/api/addons/v1beta2"
	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/conditions"
	"capstan.dev/capstan/internal/testenv"
	"capstan.dev/capstan/test/fixture"
	"capstan.dev/capstan/test/provider"
)

// mgmt is the management cluster; wl stands in for every test's workload
// cluster. Tests share wl, so what they apply there is named after their
// own namespace.
var mgmt, wl *testenv.Env

func TestMain(m *testing.M) { fixture.MainWithControllers(m, &mgmt, &wl) }

const (
	// clusterName is every test's Cluster, in the test's namespace.
	clusterName = "c"
	wait        = time.Minute
	// quiet is how long a test watches for something that must not happen.
	quiet = 3 * time.Second
)

// createCluster creates the test's Cluster, its control plane initialised
// or not, with the given labels.
func createCluster(t *testing.T, ns string, initialized bool, labels map[string]string) {
	t.Helper()
	fixture.CreateProviderCluster(t, mgmt, wl, ns, clusterName, fixture.Workers(ns, clusterName, 0), initialized)
	if labels != nil {
		labelCluster(t, ns, labels)
	}
}

func labelCluster(t *testing.T, ns string, labels map[string]string) {
	t.Helper()
	c := &clusterv1.Cluster{}
	if err := mgmt.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: clusterName}, c); err != nil {
		t.Fatal(err)
	}
	before := c.DeepCopy()
	c.Labels = labels
	if err := mgmt.Client.Patch(context.Background(), c, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
}

func initializeControlPlane(t *testing.T, ns string) {
	t.Helper()
	cp := provider.ControlPlane.New(ns, clusterName, nil)
	if err := provider.SetStatus(context.Background(), mgmt.Client, cp, map[string]any{"initialization": map[string]any{"controlPlaneInitialized": true}}); err != nil {
		t.Fatal(err)
	}
}

// addon is a manifest of a ConfigMap in the workload cluster's default
// namespace (it names none), holding value under key "v".
func addon(name, value string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\ndata:\n  v: %q\n", name, value)
}

func configMapResource(ns, name string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: data}
}

func secretResource(ns, name string, data map[string]string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Type: addonsv1.ClusterResourceSetSecretType, StringData: data}
}

var selected = map[string]string{"addons": "yes"}

func newCRS(ns, name string, strategy addonsv1.ClusterResourceSetStrategy, resources ...addonsv1.ResourceRef) *addonsv1.ClusterResourceSet {
	crs := &addonsv1.ClusterResourceSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	crs.Spec.ClusterSelector.MatchLabels = selected
	crs.Spec.Strategy = string(strategy)
	crs.Spec.Resources = resources
	return crs
}

func cmRef(name string) addonsv1.ResourceRef {
	return addonsv1.ResourceRef{Kind: string(addonsv1.ConfigMapClusterResourceSetResourceKind), Name: name}
}

func secretRef(name string) addonsv1.ResourceRef {
	return addonsv1.ResourceRef{Kind: string(addonsv1.SecretClusterResourceSetResourceKind), Name: name}
}

// workloadValue reads key v of a ConfigMap in the workload cluster's
// default namespace.
func workloadValue(ctx context.Context, name string) (string, error) {
	cm := &corev1.ConfigMap{}
	if err := wl.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, cm); err != nil {
		return "", err
	}
	return cm.Data["v"], nil
}

func eventuallyValue(t *testing.T, name, want string) {
	t.Helper()
	fixture.Eventually(t, "workload ConfigMap "+name+" holds "+want, wait, func(ctx context.Context) string {
		got, err := workloadValue(ctx, name)
		if err != nil {
			return err.Error()
		}
		return fixture.Unless(got == want, "it holds "+got)
	})
}

// eventuallyCondition waits for ResourcesApplied with the status, reason
// and a message containing msg.
func eventuallyCondition(t *testing.T, crs *addonsv1.ClusterResourceSet, status metav1.ConditionStatus, reason, msg string) {
	t.Helper()
	fixture.Eventually(t, fmt.Sprintf("ResourcesApplied %s/%s %q", status, reason, msg), wait, func(ctx context.Context) string {
		got := &addonsv1.ClusterResourceSet{}
		if err := mgmt.Client.Get(ctx, client.ObjectKeyFromObject(crs), got); err != nil {
			return err.Error()
		}
		c := conditions.Get(got, addonsv1.ResourcesAppliedCondition)
		if c == nil {
			return "no ResourcesApplied condition"
		}
		return fixture.Unless(c.Status == status && c.Reason == reason && strings.Contains(c.Message, msg) && c.ObservedGeneration == got.Generation,
			fmt.Sprintf("%s/%s %q", c.Status, c.Reason, c.Message))
	})
}

func getBinding(ctx context.Context, ns string) (*addonsv1.ClusterResourceSetBinding, error) {
	b := &addonsv1.ClusterResourceSetBinding{}
	return b, mgmt.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: clusterName}, b)
}

// eventuallyRecorded waits until the binding records ref of crs as applied
// with a hash other than notHash, and returns that hash.
func eventuallyRecorded(t *testing.T, ns, crs string, ref addonsv1.ResourceRef, notHash string) string {
	t.Helper()
	var hash string
	fixture.Eventually(t, "binding records "+ref.Name, wait, func(ctx context.Context) string {
		b, err := getBinding(ctx, ns)
		if err != nil {
			return err.Error()
		}
		e := b.Entry(crs)
		if e == nil {
			return "no entry for " + crs
		}
		rec := e.Record(ref)
		if rec == nil {
			return "no record of " + ref.Name
		}
		hash = rec.Hash
		return fixture.Unless(ptr.Deref(rec.Applied, false) && strings.HasPrefix(rec.Hash, "sha256:") && rec.Hash != notHash && !rec.LastAppliedTime.IsZero(),
			fmt.Sprintf("record %+v", rec))
	})
	return hash
}

func update(t *testing.T, obj client.Object, change func()) {
	t.Helper()
	ctx := context.Background()
	if err := mgmt.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
		t.Fatal(err)
	}
	change()
	if err := mgmt.Client.Update(ctx, obj); err != nil {
		t.Fatal(err)
	}
}

// Resources reach a selected Cluster once its control plane is initialised,
// not before; under ApplyOnce a later change of the resource is not applied.
func TestApplyOnceAfterControlPlaneInitialized(t *testing.T) {
	ns := mgmt.Namespace(t)
	name := ns + "-once"
	createCluster(t, ns, false, selected)
	cm := configMapResource(ns, "addon", map[string]string{"addon.yaml": addon(name, "v1")})
	crs := newCRS(ns, "once", "", cmRef("addon"))
	fixture.Create(t, mgmt.Client, cm, crs)

	eventuallyCondition(t, crs, metav1.ConditionFalse, addonsv1.ResourcesNotAppliedReason, "Cluster c: waiting for its control plane to be initialized")
	fixture.Consistently(t, "nothing applied before the control plane is initialized", quiet, func(ctx context.Context) string {
		if _, err := workloadValue(ctx, name); !apierrors.IsNotFound(err) {
			return fmt.Sprintf("workload ConfigMap: %v", err)
		}
		_, err := getBinding(ctx, ns)
		return fixture.Unless(apierrors.IsNotFound(err), fmt.Sprintf("binding: %v", err))
	})

	initializeControlPlane(t, ns)
	eventuallyValue(t, name, "v1")
	hash := eventuallyRecorded(t, ns, "once", cmRef("addon"), "")
	eventuallyCondition(t, crs, metav1.ConditionTrue, addonsv1.ResourcesAppliedReason, "")

	ctx := context.Background()
	got := &addonsv1.ClusterResourceSet{}
	if err := mgmt.Client.Get(ctx, client.ObjectKeyFromObject(crs), got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.Strategy != string(addonsv1.ClusterResourceSetStrategyApplyOnce) {
		t.Errorf("strategy %q, want the default ApplyOnce", got.Spec.Strategy)
	}
	if !slices.Contains(got.Finalizers, addonsv1.ClusterResourceSetFinalizer) {
		t.Errorf("finalizers %v, want %s", got.Finalizers, addonsv1.ClusterResourceSetFinalizer)
	}
	b, err := getBinding(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	if b.Spec.ClusterName != clusterName || len(b.OwnerReferences) != 1 || b.OwnerReferences[0].UID != got.UID {
		t.Errorf("binding clusterName %q owners %v, want %s owned by the ClusterResourceSet", b.Spec.ClusterName, b.OwnerReferences, clusterName)
	}
	fixture.Eventually(t, "the ConfigMap is owned by the ClusterResourceSet", wait, func(ctx context.Context) string {
		if err := mgmt.Client.Get(ctx, client.ObjectKeyFromObject(cm), cm); err != nil {
			return err.Error()
		}
		return fixture.Unless(slices.ContainsFunc(cm.OwnerReferences, func(o metav1.OwnerReference) bool { return o.UID == got.UID }), fmt.Sprint(cm.OwnerReferences))
	})

	update(t, cm, func() { cm.Data["addon.yaml"] = addon(name, "v2") })
	fixture.Consistently(t, "ApplyOnce leaves a changed resource alone", quiet, func(ctx context.Context) string {
		v, err := workloadValue(ctx, name)
		if err != nil || v != "v1" {
			return fmt.Sprintf("workload value %q (%v), want v1", v, err)
		}
		b, err := getBinding(ctx, ns)
		if err != nil {
			return err.Error()
		}
		e := b.Entry("once")
		return fixture.Unless(e != nil && e.Record(cmRef("addon")) != nil && e.Record(cmRef("addon")).Hash == hash, "the record changed")
	})
}

// Under Reconcile a changed resource is applied again, by server-side apply:
// a key dropped from the manifest is dropped from the object.
func TestReconcileReappliesChangedResource(t *testing.T) {
	ns := mgmt.Namespace(t)
	name := ns + "-rec"
	createCluster(t, ns, true, selected)
	two := fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s, namespace: default}\ndata: {v: v1, extra: x}\n", name)
	s := secretResource(ns, "addon", map[string]string{"addon.yaml": two})
	crs := newCRS(ns, "rec", addonsv1.ClusterResourceSetStrategyReconcile, secretRef("addon"))
	fixture.Create(t, mgmt.Client, s, crs)

	eventuallyValue(t, name, "v1")
	hash := eventuallyRecorded(t, ns, "rec", secretRef("addon"), "")
	eventuallyCondition(t, crs, metav1.ConditionTrue, addonsv1.ResourcesAppliedReason, "")

	update(t, s, func() { s.StringData = map[string]string{"addon.yaml": addon(name, "v2")} })
	eventuallyValue(t, name, "v2")
	eventuallyRecorded(t, ns, "rec", secretRef("addon"), hash)
	cm := &corev1.ConfigMap{}
	if err := wl.Client.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: name}, cm); err != nil {
		t.Fatal(err)
	}
	if _, kept := cm.Data["extra"]; kept {
		t.Errorf("key extra, dropped from the manifest, is still in the object: %v", cm.Data)
	}
}

// A Cluster labelled after the ClusterResourceSet exists gets its resources
// then.
func TestClusterLabelledLaterGetsResources(t *testing.T) {
	ns := mgmt.Namespace(t)
	name := ns + "-late"
	createCluster(t, ns, true, nil)
	crs := newCRS(ns, "late", addonsv1.ClusterResourceSetStrategyApplyOnce, cmRef("addon"))
	fixture.Create(t, mgmt.Client, configMapResource(ns, "addon", map[string]string{"a": addon(name, "v1")}), crs)
	eventuallyCondition(t, crs, metav1.ConditionTrue, addonsv1.ResourcesAppliedReason, "")
	fixture.Consistently(t, "an unselected Cluster gets nothing", quiet, func(ctx context.Context) string {
		_, err := workloadValue(ctx, name)
		return fixture.Unless(apierrors.IsNotFound(err), fmt.Sprintf("workload ConfigMap: %v", err))
	})

	labelCluster(t, ns, selected)
	eventuallyValue(t, name, "v1")
	eventuallyRecorded(t, ns, "late", cmRef("addon"), "")
}

// A missing resource is named in the condition, and applied as soon as it
// is created.
func TestMissingResourceIsNamedThenApplied(t *testing.T) {
	ns := mgmt.Namespace(t)
	name := ns + "-missing"
	createCluster(t, ns, true, selected)
	crs := newCRS(ns, "missing", addonsv1.ClusterResourceSetStrategyApplyOnce, cmRef("absent"))
	fixture.Create(t, mgmt.Client, crs)
	eventuallyCondition(t, crs, metav1.ConditionFalse, addonsv1.ResourcesNotAppliedReason, "ConfigMap absent does not exist")

	fixture.Create(t, mgmt.Client, configMapResource(ns, "absent", map[string]string{"a": addon(name, "v1")}))
	eventuallyValue(t, name, "v1")
	eventuallyCondition(t, crs, metav1.ConditionTrue, addonsv1.ResourcesAppliedReason, "")
}

// A malformed manifest is named, with the key and document at fault, and
// nothing of its resource is applied, not even its well-formed documents; a
// Secret of another type is refused with a reason of its own.
func TestMalformedResourceIsNamedAndNotApplied(t *testing.T) {
	ns := mgmt.Namespace(t)
	name := ns + "-bad"
	createCluster(t, ns, true, selected)
	bad := addon(name, "v1") + "---\napiVersion: v1\nmetadata: {name: nokind}\n"
	cm := configMapResource(ns, "bad", map[string]string{"x.yaml": bad})
	crs := newCRS(ns, "bad", addonsv1.ClusterResourceSetStrategyReconcile, cmRef("bad"))
	fixture.Create(t, mgmt.Client, cm, crs)
	eventuallyCondition(t, crs, metav1.ConditionFalse, addonsv1.ResourcesNotAppliedReason,
		"ConfigMap bad is malformed: key x.yaml: document 2 is not a Kubernetes object: it has no kind")
	fixture.Consistently(t, "nothing of a malformed resource is applied", quiet, func(ctx context.Context) string {
		_, err := workloadValue(ctx, name)
		return fixture.Unless(apierrors.IsNotFound(err), fmt.Sprintf("workload ConfigMap: %v", err))
	})

	update(t, cm, func() { cm.Data["x.yaml"] = addon(name, "fixed") })
	eventuallyValue(t, name, "fixed")
	eventuallyCondition(t, crs, metav1.ConditionTrue, addonsv1.ResourcesAppliedReason, "")

	opaque := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "opaque"}, StringData: map[string]string{"a": addon(name+"-opaque", "v1")}}
	wrong := newCRS(ns, "wrong-type", addonsv1.ClusterResourceSetStrategyApplyOnce, secretRef("opaque"))
	fixture.Create(t, mgmt.Client, opaque, wrong)
	eventuallyCondition(t, wrong, metav1.ConditionFalse, addonsv1.ResourcesAppliedWrongSecretTypeReason,
		`Secret opaque has type "Opaque"; set its type to addons.cluster.x-k8s.io/resource-set`)
}

// Deleting a ClusterResourceSet removes its entry from the binding and
// leaves what it applied; the last one gone takes the binding along. A
// deleted Cluster's binding is deleted.
func TestDeletionCleansBindingsAndKeepsObjects(t *testing.T) {
	ns := mgmt.Namespace(t)
	first, second := ns+"-first", ns+"-second"
	createCluster(t, ns, true, selected)
	crs1 := newCRS(ns, "first", addonsv1.ClusterResourceSetStrategyApplyOnce, cmRef("first"))
	crs2 := newCRS(ns, "second", addonsv1.ClusterResourceSetStrategyReconcile, cmRef("second"))
	fixture.Create(t, mgmt.Client,
		configMapResource(ns, "first", map[string]string{"a": addon(first, "v1")}),
		configMapResource(ns, "second", map[string]string{"a": addon(second, "v1")}),
		crs1, crs2)
	eventuallyRecorded(t, ns, "first", cmRef("first"), "")
	eventuallyRecorded(t, ns, "second", cmRef("second"), "")
	eventuallyValue(t, first, "v1")
	eventuallyValue(t, second, "v1")

	ctx := context.Background()
	if err := mgmt.Client.Delete(ctx, crs1); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, "the first set's entry and ownership leave the binding", wait, func(ctx context.Context) string {
		b, err := getBinding(ctx, ns)
		if err != nil {
			return err.Error()
		}
		return fixture.Unless(b.Entry("first") == nil && b.Entry("second") != nil && len(b.OwnerReferences) == 1 && b.OwnerReferences[0].Name == "second",
			fmt.Sprintf("entries %v owners %v", b.Spec.Bindings, b.OwnerReferences))
	})
	fixture.Eventually(t, "the first set is gone", wait, func(ctx context.Context) string {
		err := mgmt.Client.Get(ctx, client.ObjectKeyFromObject(crs1), &addonsv1.ClusterResourceSet{})
		return fixture.Unless(apierrors.IsNotFound(err), fmt.Sprint(err))
	})
	eventuallyValue(t, first, "v1")

	if err := mgmt.Client.Delete(ctx, crs2); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, "the binding left without entries is deleted", wait, func(ctx context.Context) string {
		_, err := getBinding(ctx, ns)
		return fixture.Unless(apierrors.IsNotFound(err), fmt.Sprint(err))
	})
	eventuallyValue(t, second, "v1")

	// A new set records into a new binding, which goes with the Cluster.
	crs3 := newCRS(ns, "third", addonsv1.ClusterResourceSetStrategyApplyOnce, cmRef("third"))
	fixture.Create(t, mgmt.Client, configMapResource(ns, "third", map[string]string{"a": addon(ns+"-third", "v1")}), crs3)
	eventuallyRecorded(t, ns, "third", cmRef("third"), "")
	if err := mgmt.Client.Delete(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: clusterName}}); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, "the deleted Cluster's binding is deleted", wait, func(ctx context.Context) string {
		_, err := getBinding(ctx, ns)
		return fixture.Unless(apierrors.IsNotFound(err), fmt.Sprint(err))
	})
}

// A paused ClusterResourceSet says so and applies nothing until resumed.
func TestPausedSetAppliesNothing(t *testing.T) {
	ns := mgmt.Namespace(t)
	name := ns + "-paused"
	createCluster(t, ns, true, selected)
	crs := newCRS(ns, "paused", addonsv1.ClusterResourceSetStrategyApplyOnce, cmRef("addon"))
	crs.Annotations = map[string]string{clusterv1.PausedAnnotation: ""}
	fixture.Create(t, mgmt.Client, configMapResource(ns, "addon", map[string]string{"a": addon(name, "v1")}), crs)
	fixture.Eventually(t, "Paused condition", wait, func(ctx context.Context) string {
		got := &addonsv1.ClusterResourceSet{}
		if err := mgmt.Client.Get(ctx, client.ObjectKeyFromObject(crs), got); err != nil {
			return err.Error()
		}
		return fixture.Unless(conditions.IsTrue(got, clusterv1.PausedCondition), fmt.Sprint(got.Status.Conditions))
	})
	fixture.Consistently(t, "a paused set applies nothing", quiet, func(ctx context.Context) string {
		_, err := workloadValue(ctx, name)
		return fixture.Unless(apierrors.IsNotFound(err), fmt.Sprintf("workload ConfigMap: %v", err))
	})
	update(t, crs, func() { delete(crs.Annotations, clusterv1.PausedAnnotation) })
	eventuallyValue(t, name, "v1")
	eventuallyCondition(t, crs, metav1.ConditionTrue, addonsv1.ResourcesAppliedReason, "")
}
