package move_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"capstan.dev/capstan/internal/move"
	"capstan.dev/capstan/internal/scheme"
)

// untouched fails unless every object of the graph is in c, not paused,
// with no mark of an unfinished move.
func untouched(t *testing.T, c client.Client, g *graph) {
	t.Helper()
	for _, src := range g.moved {
		cur, ok := get(t, c, src)
		if !ok {
			t.Errorf("%s is gone from the source", describe(src))
			continue
		}
		for a := range cur.GetAnnotations() {
			// A copy records its source; that is no change of the object.
			if (strings.HasPrefix(a, "move.capstan.dev/") && a != "move.capstan.dev/source-uid") || a == "cluster.x-k8s.io/paused" {
				t.Errorf("%s carries the annotation %s", describe(src), a)
			}
		}
		if _, found, _ := unstructured.NestedBool(cur.Object, "spec", "paused"); found {
			t.Errorf("%s: spec.paused is set", describe(src))
		}
	}
}

// absent fails if c holds any object of the graph.
func absent(t *testing.T, c client.Client, g *graph) {
	t.Helper()
	for _, src := range g.moved {
		if _, ok := get(t, c, src); ok {
			t.Errorf("%s is in the target", describe(src))
		}
	}
}

// nothingChanged fails unless err is a move error that stopped before its
// first write and says so.
func nothingChanged(t *testing.T, err error, want string) {
	t.Helper()
	var me *move.Error
	if !errors.As(err, &me) || !strings.Contains(err.Error(), want) {
		t.Fatalf("got %v, want a move error saying %q", err, want)
	}
	if len(me.Changed) > 0 || !strings.Contains(err.Error(), "Nothing was changed.") {
		t.Errorf("the move changed %v before failing: %v", me.Changed, err)
	}
}

// readOnly is a client of c's plane for a user who may read everything and
// write nothing.
func readOnly(t *testing.T, admin client.Client, cfg *rest.Config) client.Client {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "move-test-reader"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"get", "list", "watch"}}}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "move-test-reader"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: "move-test-reader"}}}
	for _, o := range []client.Object{role, binding} {
		if err := admin.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = admin.Delete(ctx, binding); _ = admin.Delete(ctx, role) })
	ro := rest.CopyConfig(cfg)
	ro.Impersonate = rest.ImpersonationConfig{UserName: "move-test-reader"}
	c, err := client.New(ro, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestMoveChecksTheTargetFirst: a target that cannot take the objects is
// found out before the source changes; the source stays as it was, not
// paused.
func TestMoveChecksTheTargetFirst(t *testing.T) {
	ctx := context.Background()
	a, b := planes.Mgmt.Client, planes.Workload.Client
	ns := planes.Mgmt.Namespace(t)
	g := buildGraph(t, a, ns)
	opts := move.Options{Namespace: ns}

	t.Run("directory that cannot be made", func(t *testing.T) {
		nothingChanged(t, move.ToDirectory(ctx, a, "/proc/x", opts), "checking the target: the target directory cannot be made")
		untouched(t, a, g)
	})
	t.Run("directory path is a file", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "file")
		if err := os.WriteFile(file, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		nothingChanged(t, move.ToDirectory(ctx, a, filepath.Join(file, "sub"), opts), "the target directory cannot be made")
		untouched(t, a, g)
	})
	t.Run("unreachable target", func(t *testing.T) {
		c, err := client.New(&rest.Config{Host: "https://127.0.0.1:1"}, client.Options{Scheme: scheme.New()})
		if err != nil {
			t.Fatal(err)
		}
		nothingChanged(t, move.ToCluster(ctx, a, c, opts), "connecting")
		untouched(t, a, g)
	})
	t.Run("read-only target", func(t *testing.T) {
		ro := readOnly(t, b, planes.Workload.Config)
		nothingChanged(t, move.ToCluster(ctx, a, ro, opts), "forbidden")
		untouched(t, a, g)
		absent(t, b, g)
	})
	t.Run("target without a kind", func(t *testing.T) {
		widget := schema.GroupVersionKind{Group: "widgets.test.capstan.dev", Version: "v1", Kind: "TestWidget"}
		installTestCRD(t, a, widget, "testwidgets", apiextensionsv1.NamespaceScoped)
		cl, _ := get(t, a, g.moved[0])
		w := &unstructured.Unstructured{}
		w.SetGroupVersionKind(widget)
		w.SetNamespace(ns)
		w.SetName("c1")
		w.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: core, Kind: "Cluster", Name: "c1", UID: cl.GetUID()}})
		if err := a.Create(ctx, w); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = a.Delete(ctx, w) }()
		nothingChanged(t, move.ToCluster(ctx, a, b, opts), "the target does not serve TestWidget widgets.test.capstan.dev/v1")
		untouched(t, a, g)
		absent(t, b, g)
	})
}

// TestMoveErrorSaysWhatChangedAndUndoes: a move that stops midway says
// what it changed; until it deletes from the source, an undo restores the
// source as it was and clears the target; after, an undo refuses and
// running the move again finishes it.
func TestMoveErrorSaysWhatChangedAndUndoes(t *testing.T) {
	ctx := context.Background()
	a, b := planes.Mgmt.Client, planes.Workload.Client
	ns := planes.Mgmt.Namespace(t)
	g := buildGraph(t, a, ns)
	opts := move.Options{Namespace: ns}

	opts.After = stopAt("create", 3)
	err := move.ToCluster(ctx, a, b, opts)
	var me *move.Error
	if !errors.As(err, &me) || !me.Undoable {
		t.Fatalf("got %v, want an undoable move error", err)
	}
	for _, want := range []string{"paused 3 objects in the source", "written 3 copies to the target"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q: %v", want, err)
		}
	}
	opts.After = nil
	var out bytes.Buffer
	opts.Out = &out
	if err := move.UndoToCluster(ctx, a, b, opts); err != nil {
		t.Fatal(err)
	}
	t.Logf("undo:\n%s", out.String())
	untouched(t, a, g)
	absent(t, b, g)

	// Past the first deletion the source cannot be restored: the undo
	// says so, and the move, run again, finishes.
	opts.After = stopAt("delete", 2)
	err = move.ToCluster(ctx, a, b, opts)
	if !errors.As(err, &me) || me.Undoable || !strings.Contains(err.Error(), "deleted 2 objects from the source") {
		t.Fatalf("got %v, want a move error past undoing that says what it deleted", err)
	}
	opts.After = nil
	if err := move.UndoToCluster(ctx, a, b, opts); err == nil || !strings.Contains(err.Error(), "run the same move again without --undo") {
		t.Fatalf("undo after deletions: got %v, want a refusal", err)
	}
	if err := move.ToCluster(ctx, a, b, opts); err != nil {
		t.Fatal(err)
	}
	expectMoved(t, g, a, b)

	// An unfinished move to a directory is undone too: its files go.
	dir := filepath.Join(t.TempDir(), "moved")
	opts.After = stopAt("create", 4)
	if err := move.ToDirectory(ctx, b, dir, opts); !errors.Is(err, errStop) {
		t.Fatalf("got %v, want the move stopped", err)
	}
	opts.After = nil
	if err := move.UndoToDirectory(ctx, b, dir, opts); err != nil {
		t.Fatal(err)
	}
	if files, _ := filepath.Glob(filepath.Join(dir, "*.yaml")); len(files) != 0 {
		t.Errorf("the undo left %d files", len(files))
	}
	untouched(t, b, g)
}

// TestMoveKilledAtEveryWriteResumes stops a move after every single write
// it makes (pausing, creating, marking, deleting, unpausing), one write per
// run, and runs it again each time: it ends as an uninterrupted move does.
// Then back from a directory the same way.
func TestMoveKilledAtEveryWriteResumes(t *testing.T) {
	ctx := context.Background()
	a, b := planes.Mgmt.Client, planes.Workload.Client
	ns := planes.Mgmt.Namespace(t)
	g := buildGraph(t, a, ns)

	// resumeAfterEveryWrite runs a move until a run ends without being
	// stopped, each run stopped after its first write, and returns the
	// writes made.
	resumeAfterEveryWrite := func(t *testing.T, what string, moveOnce func(move.Options) error) map[string]int {
		t.Helper()
		writes := map[string]int{}
		for run := 1; ; run++ {
			if run > 200 {
				t.Fatalf("%s: still not done after %d runs: %v", what, run, writes)
			}
			stopped := ""
			err := moveOnce(move.Options{Namespace: ns, After: func(step string, _ int, _ move.Key) error {
				stopped = step
				return errStop
			}})
			if stopped == "" {
				if err != nil {
					t.Fatalf("%s, run %d: %v", what, run, err)
				}
				t.Logf("%s: %d runs, writes %v", what, run, writes)
				return writes
			}
			if !errors.Is(err, errStop) {
				t.Fatalf("%s, run %d: got %v, want stopped after a %s", what, run, err, stopped)
			}
			writes[stopped]++
		}
	}
	w := resumeAfterEveryWrite(t, "to the second plane", func(o move.Options) error { return move.ToCluster(ctx, a, b, o) })
	if w["pause"] == 0 || w["create"] != len(g.moved) || w["commit"] == 0 || w["delete"] != len(g.moved) || w["unpause"] == 0 {
		t.Errorf("writes %v: want pauses, %d creations, marks, %d deletions and unpauses", w, len(g.moved), len(g.moved))
	}
	expectMoved(t, g, a, b)
	if t.Failed() {
		return
	}

	// To a directory in one go (it goes through the same steps as above),
	// then back from it, stopped after every write.
	dir := filepath.Join(t.TempDir(), "moved")
	if err := move.ToDirectory(ctx, b, dir, move.Options{Namespace: ns}); err != nil {
		t.Fatal(err)
	}
	resumeAfterEveryWrite(t, "from the directory", func(o move.Options) error { return move.FromDirectory(ctx, dir, a, o) })
	absent(t, b, g)
	for _, src := range g.moved {
		cp, ok := get(t, a, src)
		if !ok {
			t.Errorf("%s did not come back", describe(src))
			continue
		}
		if _, found, _ := unstructured.NestedBool(cp.Object, "spec", "paused"); found {
			t.Errorf("%s is still paused", describe(src))
		}
	}
}
