package inmemory

import (
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
)

func node(name string, lbls map[string]any) object {
	return object{"apiVersion": "v1", "kind": "Node", "metadata": map[string]any{"name": name, "labels": lbls}}
}

// The store versions every write, refuses a stale update with a conflict,
// writes nothing for an unchanged object, and resumes a watch from a
// resourceVersion with exactly the events after it.
func TestStoreVersionsAndWatches(t *testing.T) {
	s := newStore()
	gr := gr("", "nodes")
	a, err := s.create(gr, "/nodes", node("a", map[string]any{"role": "cp"}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.create(gr, "/nodes", node("a", nil)); !apierrors.IsAlreadyExists(err) {
		t.Fatalf("second create: want AlreadyExists, got %v", err)
	}
	afterA := s.currentRV()
	if _, err := s.create(gr, "/nodes", node("b", map[string]any{"role": "worker"})); err != nil {
		t.Fatal(err)
	}

	stale := copyObject(a)
	fresh := copyObject(a)
	metaOf(fresh)["annotations"] = map[string]any{"x": "1"}
	if _, err := s.update(gr, "/nodes", fresh); err != nil {
		t.Fatal(err)
	}
	metaOf(stale)["annotations"] = map[string]any{"x": "2"}
	if _, err := s.update(gr, "/nodes", stale); !apierrors.IsConflict(err) {
		t.Fatalf("update from a stale copy: want Conflict, got %v", err)
	}
	rv := s.currentRV()
	same, _ := s.get("/nodes", "", "a")
	if _, err := s.update(gr, "/nodes", copyObject(same)); err != nil || s.currentRV() != rv {
		t.Fatalf("an unchanged update wrote: err %v, resourceVersion %d -> %d", err, rv, s.currentRV())
	}

	// Resuming after a's creation replays b's creation and a's update.
	w, replay, _, err := s.watch("/nodes", "", labels.Everything(), fields.Everything(), afterA, false)
	if err != nil {
		t.Fatal(err)
	}
	defer s.stopWatch(w)
	var got []string
	for _, e := range replay {
		_, name := nameOf(e.obj)
		got = append(got, e.Type+" "+name)
	}
	if want := "ADDED b,MODIFIED a"; join(got) != want {
		t.Fatalf("replayed %q, want %q", join(got), want)
	}
	// Later events arrive live, filtered by the watch's selector.
	cp, _ := labels.Parse("role=cp")
	w2, _, _, _ := s.watch("/nodes", "", cp, fields.Everything(), s.currentRV(), false)
	defer s.stopWatch(w2)
	if _, err := s.remove(gr, "/nodes", "", "b"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.remove(gr, "/nodes", "", "a"); err != nil {
		t.Fatal(err)
	}
	if e := <-w2.ch; e.Type != "DELETED" || fieldValue(e.obj, "metadata.name") != "a" {
		t.Fatalf("live event: %s %v", e.Type, e.obj)
	}

	// A resourceVersion older than the history is Gone: the client relists.
	for i := 0; i < historySize+1; i++ {
		o, _ := s.create(gr, "/nodes", node("n", nil))
		_, _ = s.remove(gr, "/nodes", "", fieldValue(o, "metadata.name"))
	}
	if _, _, _, err := s.watch("/nodes", "", labels.Everything(), fields.Everything(), afterA, false); err != errGone {
		t.Fatalf("watch from a forgotten resourceVersion: want errGone, got %v", err)
	}
}

func join(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += ","
		}
		out += x
	}
	return out
}
