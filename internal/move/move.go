package move

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Options tune a move.
type Options struct {
	// Namespace limits the move to one namespace; empty moves every
	// namespace.
	Namespace string
	// DryRun prints the plan and changes nothing.
	DryRun bool
	// Out receives progress lines; nil discards them.
	Out io.Writer
	// PauseTimeout bounds the wait until the source's controllers report
	// every paused object Paused; 0 does not wait (for a source where no
	// controller runs).
	PauseTimeout time.Duration
	// StepDelay waits after each object written to the target, so that a
	// test can interrupt a move halfway.
	StepDelay time.Duration
	// After, when set, runs after each write a move makes, n counting
	// each step's writes from 1 in every run: "pause" (a source object
	// paused), "create" (a copy written to the target, not one an earlier
	// run wrote), "commit" (a source Cluster marked before deleting),
	// "delete" (a source object deleted) and "unpause" (a copy unpaused).
	// An error stops the move there, as an interruption would. Tests
	// interrupt moves with it.
	After func(step string, n int, k Key) error
}

// writeHook counts a run's writes of each step for Options.After.
type writeHook struct {
	after func(step string, n int, k Key) error
	n     map[string]int
}

func newWriteHook(after func(string, int, Key) error) *writeHook {
	return &writeHook{after: after, n: map[string]int{}}
}

// wrote tells the hook of one write; its error stops the move.
func (h *writeHook) wrote(step string, k Key) error {
	if h == nil || h.after == nil {
		return nil
	}
	h.n[step]++
	return h.after(step, h.n[step], k)
}

// source is where objects come from: a management cluster or a directory.
type source interface {
	describe() string
	// objects returns what moves; with pause it first pauses the
	// Clusters and waits until their objects report it.
	objects(ctx context.Context, pause bool) ([]*unstructured.Unstructured, error)
	// remove deletes a moved object from the source and tells whether it
	// wrote anything.
	remove(ctx context.Context, obj *unstructured.Unstructured) (bool, error)
	// commit marks the source, before the first deletion, as no longer
	// restorable by an undo, and tells whether it wrote anything (an error
	// may come after some marks); committed tells whether it is so marked.
	commit(ctx context.Context, objs []*unstructured.Unstructured) (bool, error)
	committed(objs []*unstructured.Unstructured) bool
	// unpause undoes what the move paused in the source.
	unpause(ctx context.Context) ([]Key, error)
	// paused counts the source objects the move has paused so far.
	paused() int
}

// target is where objects go: a management cluster or a directory.
type target interface {
	describe() string
	// check tells, before anything in the source changes, whether every
	// object can be written: the kinds are served, the namespaces exist
	// (they are created), the names are free or hold copies from an
	// earlier run, and the target accepts the writes (a server-side dry
	// run; a probe file).
	check(ctx context.Context, objs []*unstructured.Unstructured) error
	prepare(ctx context.Context, objs []*unstructured.Unstructured) error
	// has tells whether an object that does not move now (an owner whose
	// copy an earlier run made) is there already.
	has(ctx context.Context, k Key) (bool, error)
	// put writes one object (its owners are there); created is false when
	// an earlier run had written it.
	put(ctx context.Context, obj *unstructured.Unstructured, batch int) (created bool, err error)
	// differences compares the copy with its source.
	differences(ctx context.Context, obj *unstructured.Unstructured) ([]string, error)
	// finish unpauses the Clusters the move paused.
	finish(ctx context.Context) ([]Key, error)
	// discard removes the copy of obj that an unfinished move made, if
	// there is one, and tells whether there was.
	discard(ctx context.Context, obj *unstructured.Unstructured) (bool, error)
}

// Error is a move that stopped at one object.
type Error struct {
	// Step is what the move was doing: "pausing", "creating", "verifying",
	// "deleting" or "unpausing".
	Step string
	// Object is the object it failed on, if one.
	Object Key
	Err    error
	// Changed says what the move (this run and earlier ones) has changed
	// so far; empty when nothing changed.
	Changed []string
	// Undoable is set when an undo can still restore the source as it
	// was: nothing has been deleted from it.
	Undoable bool
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("%s: %v", e.Step, e.Err)
	if e.Object != (Key{}) {
		msg = fmt.Sprintf("%s %s: %v", e.Step, e.Object, e.Err)
	}
	if len(e.Changed) == 0 {
		return msg + "\nNothing was changed."
	}
	return msg + "\nThe move had " + joinList(e.Changed) + "."
}

func joinList(items []string) string {
	if len(items) < 2 {
		return strings.Join(items, "")
	}
	return strings.Join(items[:len(items)-1], ", ") + " and " + items[len(items)-1]
}

// tally is what a move has changed, for its error.
type tally struct {
	src                       source
	created, deleted, unpause int
	committed                 bool
}

// fail makes the error of a move that stopped, saying what it changed.
func (t *tally) fail(step string, k Key, err error) *Error {
	e := &Error{Step: step, Object: k, Err: err, Undoable: !t.committed}
	if n := t.src.paused(); n > 0 {
		e.Changed = append(e.Changed, fmt.Sprintf("paused %d objects in %s (annotation %s)", n, t.src.describe(), pausedByMoveKey))
	}
	if t.created > 0 {
		e.Changed = append(e.Changed, fmt.Sprintf("written %d copies to the target, paused", t.created))
	}
	if t.committed {
		e.Changed = append(e.Changed, "begun deleting from the source")
	}
	if t.deleted > 0 {
		e.Changed = append(e.Changed, fmt.Sprintf("deleted %d objects from the source", t.deleted))
	}
	if t.unpause > 0 {
		e.Changed = append(e.Changed, fmt.Sprintf("unpaused %d objects in the target", t.unpause))
	}
	return e
}

func (e *Error) Unwrap() error { return e.Err }

// run is the move itself, the same for every source and target.
func run(ctx context.Context, src source, dst target, o Options) error {
	out := o.Out
	if out == nil {
		out = io.Discard
	}
	started := time.Now()
	t := &tally{src: src}
	if !o.DryRun {
		// Everything that can be checked is checked before the source
		// changes: a target that cannot take the objects must not leave
		// the source paused.
		preview, err := src.objects(ctx, false)
		if err != nil {
			return t.fail("reading the source", Key{}, err)
		}
		if len(preview) > 0 {
			if err := dst.check(ctx, preview); err != nil {
				return t.fail("checking the target", Key{}, err)
			}
		}
	}
	objs, err := src.objects(ctx, !o.DryRun)
	if err != nil {
		return t.fail("pausing", Key{}, err)
	}
	t.committed = src.committed(objs)
	byKey := map[Key]*unstructured.Unstructured{}
	var nodes []Node
	global := globalKinds(objs)
	for _, u := range objs {
		byKey[keyOf(u)] = u
		nodes = append(nodes, Node{Key: keyOf(u), Owners: ownerKeys(u, global)})
	}
	present := map[Key]bool{}
	for _, n := range nodes {
		for _, owner := range n.Owners {
			if _, moving := byKey[owner]; moving {
				continue
			}
			if _, known := present[owner]; known {
				continue
			}
			ok, err := dst.has(ctx, owner)
			if err != nil {
				return t.fail("planning", owner, err)
			}
			present[owner] = ok
		}
	}
	batches, err := Order(nodes, func(k Key) bool { return present[k] })
	if err != nil {
		return t.fail("planning", Key{}, err)
	}

	kept := keptInSource(nodes, batches)
	if o.DryRun {
		fmt.Fprintf(out, "Would move %d objects from %s to %s, in this order (deleted from the source in reverse, except those marked kept):\n", len(objs), src.describe(), dst.describe())
		for i, b := range batches {
			for _, k := range b {
				note := ""
				if kept[k] {
					note = "  (copied, kept in the source)"
				}
				fmt.Fprintf(out, "  %2d  %s%s\n", i+1, k, note)
			}
		}
		return nil
	}
	if len(objs) == 0 {
		fmt.Fprintf(out, "Nothing to move from %s.\n", src.describe())
	} else {
		fmt.Fprintf(out, "Moving %d objects from %s to %s.\n", len(objs), src.describe(), dst.describe())
		if err := dst.prepare(ctx, objs); err != nil {
			return t.fail("preparing the target", Key{}, err)
		}
	}

	hook := newWriteHook(o.After)
	written, created := 0, 0
	for i, b := range batches {
		for _, k := range b {
			isNew, err := dst.put(ctx, byKey[k], i+1)
			if isNew {
				t.created = written + 1
			}
			if err != nil {
				return t.fail("creating", k, err)
			}
			written++
			t.created = written
			verb := "exists already (earlier run)"
			if isNew {
				created++
				verb = "created"
			}
			fmt.Fprintf(out, "  [%d/%d] %s %s\n", written, len(objs), verb, k)
			if isNew {
				if err := hook.wrote("create", k); err != nil {
					return t.fail("creating", k, err)
				}
			}
			if o.StepDelay > 0 {
				select {
				case <-ctx.Done():
					return t.fail("creating", k, ctx.Err())
				case <-time.After(o.StepDelay):
				}
			}
		}
	}
	if len(objs) > 0 {
		fmt.Fprintf(out, "Created %d objects (%d were there from an earlier run).\n", written, written-created)
	}

	var problems []string
	for _, b := range batches {
		for _, k := range b {
			d, err := dst.differences(ctx, byKey[k])
			if err != nil {
				return t.fail("verifying", k, err)
			}
			for _, line := range d {
				problems = append(problems, fmt.Sprintf("%s: %s", k, line))
			}
		}
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		return t.fail("verifying", Key{}, fmt.Errorf("%d differences between the source and the copies; nothing was deleted from the source:\n  %s",
			len(problems), strings.Join(problems, "\n  ")))
	}
	if len(objs) > 0 {
		fmt.Fprintf(out, "Verified %d copies: spec, labels and annotations equal the source's.\n", written)
	}

	toDelete := len(objs) - len(kept)
	if toDelete > 0 {
		// From here on the source loses objects: an undo could no longer
		// bring it back as it was, and says so.
		marked, err := src.commit(ctx, objs)
		t.committed = t.committed || marked
		if err != nil {
			return t.fail("deleting", Key{}, err)
		}
		t.committed = true
	}
	deleted := 0
	for _, k := range DeletionOrder(batches) {
		if kept[k] {
			fmt.Fprintf(out, "  kept %s in the source (cluster-scoped, possibly shared)\n", k)
			continue
		}
		removed, err := src.remove(ctx, byKey[k])
		if err != nil {
			return t.fail("deleting", k, err)
		}
		deleted++
		fmt.Fprintf(out, "  [%d/%d] deleted %s from the source\n", deleted, toDelete, k)
		if removed {
			t.deleted++
			if err := hook.wrote("delete", k); err != nil {
				return t.fail("deleting", k, err)
			}
		}
	}

	unpaused, err := dst.finish(ctx)
	t.unpause = len(unpaused)
	if err != nil {
		return t.fail("unpausing", Key{}, err)
	}
	for _, k := range unpaused {
		fmt.Fprintf(out, "Unpaused %s in %s.\n", k, dst.describe())
	}
	fmt.Fprintf(out, "Moved %d objects in %.1fs.\n", written, time.Since(started).Seconds())
	return nil
}

// keptInSource are the objects a move copies but does not delete from the
// source: cluster-scoped objects, which other clusters and namespaces of
// the source may share (identities, for example), and what they own, which
// their owner in the source still uses. Batches are in owner order, so an
// object's owners are decided before it.
func keptInSource(nodes []Node, batches [][]Key) map[Key]bool {
	owners := map[Key][]Key{}
	for _, n := range nodes {
		owners[n.Key] = n.Owners
	}
	kept := map[Key]bool{}
	for _, b := range batches {
		for _, k := range b {
			if k.Namespace == "" {
				kept[k] = true
				continue
			}
			for _, o := range owners[k] {
				if kept[o] {
					kept[k] = true
					break
				}
			}
		}
	}
	return kept
}

// undo takes back a move that stopped before it deleted anything from the
// source: it removes the copies it made in the target (those that record a
// source object's UID; cluster-scoped ones stay, as other clusters of the
// target may use them) and unpauses what it paused in the source.
func undo(ctx context.Context, src source, dst target, o Options) error {
	out := o.Out
	if out == nil {
		out = io.Discard
	}
	t := &tally{src: src}
	objs, err := src.objects(ctx, false)
	if err != nil {
		return t.fail("reading the source", Key{}, err)
	}
	if src.committed(objs) {
		t.committed = true
		return t.fail("undoing", Key{}, errors.New("the move has begun deleting objects from the source, which an undo cannot bring back: run the same move again without --undo to finish it"))
	}
	discarded := 0
	for _, u := range objs {
		if u.GetNamespace() == "" {
			continue
		}
		gone, err := dst.discard(ctx, u)
		if err != nil {
			return t.fail("undoing", keyOf(u), fmt.Errorf("removing the copy from %s: %w", dst.describe(), err))
		}
		if gone {
			discarded++
		}
	}
	unpaused, err := src.unpause(ctx)
	if err != nil {
		return t.fail("undoing", Key{}, err)
	}
	fmt.Fprintf(out, "Removed %d copies from %s.\n", discarded, dst.describe())
	for _, k := range unpaused {
		fmt.Fprintf(out, "Unpaused %s in %s.\n", k, src.describe())
	}
	fmt.Fprintf(out, "The move is undone: %s is as it was before the move.\n", src.describe())
	return nil
}

// UndoToCluster undoes an unfinished ToCluster with the same clients and
// options.
func UndoToCluster(ctx context.Context, source, target client.Client, o Options) error {
	return undo(ctx, newClusterSource(source, o), newClusterTarget(target, o), o)
}

// UndoToDirectory undoes an unfinished ToDirectory.
func UndoToDirectory(ctx context.Context, source client.Client, dir string, o Options) error {
	return undo(ctx, newClusterSource(source, o), &dirTarget{dir: dir}, o)
}

// UndoFromDirectory undoes an unfinished FromDirectory: the copies it made
// go; the files stay.
func UndoFromDirectory(ctx context.Context, dir string, target client.Client, o Options) error {
	return undo(ctx, &dirSource{dir: dir, namespace: o.Namespace}, newClusterTarget(target, o), o)
}
