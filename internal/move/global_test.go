package move_test

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"capstan.dev/capstan/internal/move"
	"capstan.dev/capstan/test/fixture"
)

// identityGVK is a cluster-scoped test kind, like the identities
// infrastructure providers share between clusters.
var identityGVK = schema.GroupVersionKind{Group: "global.test.capstan.dev", Version: "v1", Kind: "TestIdentity"}

// installIdentityCRD installs the cluster-scoped test kind, labelled as a
// provider's, and waits until the plane serves it.
func installIdentityCRD(t *testing.T, c client.Client) {
	t.Helper()
	installTestCRD(t, c, identityGVK, "testidentities", apiextensionsv1.ClusterScoped)
}

// installTestCRD installs a kind of any shape, labelled as a provider's,
// and waits until the plane serves it.
func installTestCRD(t *testing.T, c client.Client, gvk schema.GroupVersionKind, plural string, scope apiextensionsv1.ResourceScope) {
	t.Helper()
	ctx := context.Background()
	preserve := true
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{
			Name:   plural + "." + gvk.Group,
			Labels: map[string]string{"cluster.x-k8s.io/provider": "infrastructure-test"},
		},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: gvk.Group,
			Scope: scope,
			Names: apiextensionsv1.CustomResourceDefinitionNames{
				Plural: plural, Singular: strings.ToLower(gvk.Kind), Kind: gvk.Kind, ListKind: gvk.Kind + "List",
			},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: gvk.Version, Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: &preserve,
				}},
			}},
		},
	}
	if err := c.Create(ctx, crd); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	fixture.Eventually(t, "the "+gvk.Kind+" CRD is established", time.Minute, func(context.Context) string {
		cur := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(crd), cur); err != nil {
			return err.Error()
		}
		for _, cond := range cur.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				list := &unstructured.UnstructuredList{}
				list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
				if err := c.List(ctx, list); err != nil {
					return "listing: " + err.Error()
				}
				return ""
			}
		}
		return "not established"
	})
}

func identity(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"tenant": name + "-tenant"}}}
	u.SetGroupVersionKind(identityGVK)
	u.SetName(name)
	return u
}

// identities names the TestIdentities of a plane among names.
func identities(t *testing.T, c client.Client, names ...string) []string {
	t.Helper()
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(identityGVK.GroupVersion().WithKind(identityGVK.Kind + "List"))
	if err := c.List(context.Background(), list); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, u := range list.Items {
		for _, n := range names {
			if u.GetName() == n {
				out = append(out, n)
			}
		}
	}
	sort.Strings(out)
	return out
}

// TestMoveGlobalObjects moves a namespace's cluster graph with the
// cluster-scoped objects labelled for move (and what they own), interrupted
// once; the global objects are copied exactly once and stay in the source,
// the unlabelled one stays only in the source; then through a directory
// back into a source that lost them.
func TestMoveGlobalObjects(t *testing.T) {
	ctx := context.Background()
	a, b := planes.Mgmt.Client, planes.Workload.Client
	installIdentityCRD(t, a)
	installIdentityCRD(t, b)
	ns := planes.Mgmt.Namespace(t)
	g := buildGraph(t, a, ns)

	rootName, childName, otherName := ns+"-shared", ns+"-shared-child", ns+"-unlabelled"
	root := identity(rootName)
	root.SetLabels(map[string]string{move.MoveLabel: ""})
	if err := a.Create(ctx, root); err != nil {
		t.Fatal(err)
	}
	child := identity(childName)
	child.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: identityGVK.GroupVersion().String(), Kind: identityGVK.Kind, Name: rootName, UID: root.GetUID()}})
	if err := a.Create(ctx, child); err != nil {
		t.Fatal(err)
	}
	if err := a.Create(ctx, identity(otherName)); err != nil {
		t.Fatal(err)
	}
	// Later tests must not see them: a --namespace move takes every
	// labelled global object.
	t.Cleanup(func() {
		for _, c := range []client.Client{a, b} {
			for _, n := range []string{childName, rootName, otherName} {
				_ = c.Delete(context.Background(), identity(n))
			}
		}
	})
	all := []string{rootName, childName, otherName}
	moved := []string{rootName, childName}
	sort.Strings(moved)

	var out bytes.Buffer
	opts := move.Options{Namespace: ns, Out: &out}
	opts.After = stopAt("create", 1)
	if err := move.ToCluster(ctx, a, b, opts); !errors.Is(err, errStop) {
		t.Fatalf("got %v, want the move stopped after 1 creation", err)
	}
	if got := identities(t, b, all...); len(got) != 1 || got[0] != rootName {
		t.Fatalf("after one creation the target has identities %v, want the labelled root first: %s", got, out.String())
	}
	opts.After = nil
	out.Reset()
	if err := move.ToCluster(ctx, a, b, opts); err != nil {
		t.Fatalf("resuming: %v\n%s", err, out.String())
	}
	t.Logf("resumed run:\n%s", out.String())
	if !strings.Contains(out.String(), "exists already (earlier run) TestIdentity."+identityGVK.Group+" "+rootName) {
		t.Errorf("the resumed run did not recognise the global object's copy:\n%s", out.String())
	}
	expectMoved(t, g, a, b)

	check := func(when string) {
		t.Helper()
		if got := identities(t, b, all...); strings.Join(got, ",") != strings.Join(moved, ",") {
			t.Errorf("%s: the target has identities %v, want exactly %v", when, got, moved)
		}
		if got := identities(t, a, all...); len(got) != 3 {
			t.Errorf("%s: the source has identities %v, want all three kept", when, got)
		}
		srcRoot, okSrc := get(t, a, root)
		cpRoot, ok := get(t, b, root)
		if !ok || !okSrc {
			t.Errorf("%s: the root is in the source %v, in the target %v; want both", when, okSrc, ok)
			return
		}
		if uid := cpRoot.GetAnnotations()["move.capstan.dev/source-uid"]; uid != string(srcRoot.GetUID()) {
			t.Errorf("%s: the copy's source-uid is %q, want %q", when, uid, srcRoot.GetUID())
		}
		if tenant, _, _ := unstructured.NestedString(cpRoot.Object, "spec", "tenant"); tenant != rootName+"-tenant" {
			t.Errorf("%s: the copy's spec is %v", when, cpRoot.Object["spec"])
		}
		cpChild, ok := get(t, b, child)
		if ok && (len(cpChild.GetOwnerReferences()) != 1 || cpChild.GetOwnerReferences()[0].UID != cpRoot.GetUID()) {
			t.Errorf("%s: the child's copy is owned by %v, want the root's copy %s", when, cpChild.GetOwnerReferences(), cpRoot.GetUID())
		}
	}
	check("after the move")

	// Run again: nothing of the namespace is left to move, the global
	// objects are recognised, not copied twice.
	out.Reset()
	if err := move.ToCluster(ctx, a, b, opts); err != nil {
		t.Fatalf("moving again: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "kept TestIdentity."+identityGVK.Group+" "+rootName+" in the source") {
		t.Errorf("the second run did not say it keeps the global object:\n%s", out.String())
	}
	check("after moving again")
	if t.Failed() {
		return
	}

	// Through a directory into the first plane, which lost its global
	// objects meanwhile: the files bring them back, the child owned by the
	// root's new copy.
	dir := filepath.Join(t.TempDir(), "moved")
	if err := move.ToDirectory(ctx, b, dir, opts); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*_"+identityGVK.Group+"_"+identityGVK.Kind+"__*.yaml"))
	if len(files) != 2 {
		t.Fatalf("%d files of global objects, want 2: %v", len(files), files)
	}
	for _, n := range moved {
		if err := a.Delete(ctx, identity(n)); client.IgnoreNotFound(err) != nil {
			t.Fatal(err)
		}
	}
	fixture.Eventually(t, "the source's global objects are gone", time.Minute, func(context.Context) string {
		if got := identities(t, a, moved...); len(got) > 0 {
			return strings.Join(got, ",")
		}
		return ""
	})
	out.Reset()
	if err := move.FromDirectory(ctx, dir, a, opts); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if got := identities(t, a, all...); len(got) != 3 {
		t.Errorf("after the directory round trip the first plane has identities %v, want all three", got)
	}
	backRoot, ok1 := get(t, a, root)
	backChild, ok2 := get(t, a, child)
	if !ok1 || !ok2 {
		t.Fatal("the global objects did not come back from the directory")
	}
	if refs := backChild.GetOwnerReferences(); len(refs) != 1 || refs[0].UID != backRoot.GetUID() {
		t.Errorf("the child came back owned by %v, want the root %s", refs, backRoot.GetUID())
	}
	if _, ok := get(t, a, g.moved[0]); !ok {
		t.Error("the Cluster did not come back from the directory")
	}
	if got := identities(t, b, all...); strings.Join(got, ",") != strings.Join(moved, ",") {
		t.Errorf("the move to a directory deleted the global objects from the second plane: %v", got)
	}
}
