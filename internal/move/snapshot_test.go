package move_test

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"capstan.dev/capstan/internal/move"
)

// A snapshot copies a namespace's cluster graph into a directory (files
// 0600) and leaves the source as it was: every object there with its UID,
// nothing left paused. Restoring it elsewhere creates every object with
// its spec and status, unpaused at the end; restoring it where the
// originals live is refused before anything is written.
func TestSnapshotKeepsTheSourceAndRestores(t *testing.T) {
	ctx := context.Background()
	src, dst := planes.Mgmt.Client, planes.Workload.Client
	ns := planes.Mgmt.Namespace(t)
	g := buildGraph(t, src, ns)
	dir := filepath.Join(t.TempDir(), "snapshot")

	if err := move.Snapshot(ctx, src, dir, move.Options{Namespace: ns}); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) != len(g.moved) {
		t.Fatalf("%d files, %v; want one per object of the graph (%d)", len(files), err, len(g.moved))
	}
	for _, f := range files {
		if fi, err := os.Stat(f); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, %v; want 0600", f, fi.Mode(), err)
		}
	}
	unpaused := func(u *unstructured.Unstructured, where string) {
		t.Helper()
		for _, a := range []string{"move.capstan.dev/paused", "cluster.x-k8s.io/paused"} {
			if _, ok := u.GetAnnotations()[a]; ok {
				t.Errorf("%s in %s carries %s", describe(u), where, a)
			}
		}
		if _, found, _ := unstructured.NestedBool(u.Object, "spec", "paused"); found {
			t.Errorf("%s in %s: spec.paused is set", describe(u), where)
		}
	}
	for _, u := range g.moved {
		cur, ok := get(t, src, u)
		if !ok || cur.GetUID() != u.GetUID() {
			t.Errorf("%s is gone from the source or replaced", describe(u))
			continue
		}
		unpaused(cur, "the source")
	}

	err = move.Restore(ctx, dir, src, move.Options{Namespace: ns})
	if err == nil || !strings.Contains(err.Error(), "not the snapshot's") || !strings.Contains(err.Error(), "Cluster") {
		t.Fatalf("restoring over the originals: %v; want a refusal naming the objects", err)
	}
	for _, u := range g.moved {
		if cur, _ := get(t, src, u); cur != nil && cur.GetAnnotations()["move.capstan.dev/source-uid"] != "" {
			t.Errorf("%s in the source was written by the refused restore", describe(u))
		}
	}

	if err := move.Restore(ctx, dir, dst, move.Options{Namespace: ns}); err != nil {
		t.Fatal(err)
	}
	for _, u := range g.moved {
		cp, ok := get(t, dst, u)
		if !ok {
			t.Errorf("%s was not restored", describe(u))
			continue
		}
		for _, f := range []string{"spec", "data", "status"} {
			if !reflect.DeepEqual(u.Object[f], cp.Object[f]) {
				t.Errorf("%s: %s differs:\nsource   %v\nrestored %v", describe(u), f, u.Object[f], cp.Object[f])
			}
		}
		unpaused(cp, "the target")
	}
	// A restore interrupted while unpausing (the Cluster still paused, the
	// other objects not) finishes when run again.
	for _, u := range g.moved {
		if u.GetKind() != "Cluster" {
			continue
		}
		cp, _ := get(t, dst, u)
		patch := []byte(`{"metadata":{"annotations":{"move.capstan.dev/paused":"true"}},"spec":{"paused":true}}`)
		if err := dst.Patch(ctx, cp, client.RawPatch(types.MergePatchType, patch)); err != nil {
			t.Fatal(err)
		}
	}
	if err := move.Restore(ctx, dir, dst, move.Options{Namespace: ns}); err != nil {
		t.Errorf("restoring again: %v", err)
	}
	for _, u := range g.moved {
		if cp, ok := get(t, dst, u); ok {
			unpaused(cp, "the target, after the second run")
		}
	}
}
