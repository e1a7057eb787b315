package move

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
	// After, when set, runs after each object is written to the target
	// (step "create") and after each is deleted from the source (step
	// "delete"), n counting from 1; an error stops the move there, as an
	// interruption would. Tests interrupt moves with it.
	After func(step string, n int, k Key) error
}

// source is where objects come from: a management cluster or a directory.
type source interface {
	describe() string
	// objects returns what moves; with pause it first pauses the
	// Clusters and waits until their objects report it.
	objects(ctx context.Context, pause bool) ([]*unstructured.Unstructured, error)
	// remove deletes a moved object from the source.
	remove(ctx context.Context, obj *unstructured.Unstructured) error
}

// target is where objects go: a management cluster or a directory.
type target interface {
	describe() string
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
}

// Error is a move that stopped at one object.
type Error struct {
	// Step is what the move was doing: "pausing", "creating", "verifying",
	// "deleting" or "unpausing".
	Step string
	// Object is the object it failed on, if one.
	Object Key
	Err    error
}

func (e *Error) Error() string {
	if e.Object != (Key{}) {
		return fmt.Sprintf("%s %s: %v", e.Step, e.Object, e.Err)
	}
	return fmt.Sprintf("%s: %v", e.Step, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// run is the move itself, the same for every source and target.
func run(ctx context.Context, src source, dst target, o Options) error {
	out := o.Out
	if out == nil {
		out = io.Discard
	}
	started := time.Now()
	objs, err := src.objects(ctx, !o.DryRun)
	if err != nil {
		return &Error{Step: "pausing", Err: err}
	}
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
				return &Error{Step: "planning", Object: owner, Err: err}
			}
			present[owner] = ok
		}
	}
	batches, err := Order(nodes, func(k Key) bool { return present[k] })
	if err != nil {
		return &Error{Step: "planning", Err: err}
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
			return &Error{Step: "preparing the target", Err: err}
		}
	}

	written, created := 0, 0
	for i, b := range batches {
		for _, k := range b {
			isNew, err := dst.put(ctx, byKey[k], i+1)
			if err != nil {
				return &Error{Step: "creating", Object: k, Err: err}
			}
			written++
			verb := "exists already (earlier run)"
			if isNew {
				created++
				verb = "created"
			}
			fmt.Fprintf(out, "  [%d/%d] %s %s\n", written, len(objs), verb, k)
			if o.After != nil {
				if err := o.After("create", written, k); err != nil {
					return &Error{Step: "creating", Object: k, Err: err}
				}
			}
			if o.StepDelay > 0 {
				select {
				case <-ctx.Done():
					return &Error{Step: "creating", Object: k, Err: ctx.Err()}
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
				return &Error{Step: "verifying", Object: k, Err: err}
			}
			for _, line := range d {
				problems = append(problems, fmt.Sprintf("%s: %s", k, line))
			}
		}
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		return &Error{Step: "verifying", Err: fmt.Errorf("%d differences between the source and the copies; nothing was deleted from the source, which stays paused:\n  %s",
			len(problems), strings.Join(problems, "\n  "))}
	}
	if len(objs) > 0 {
		fmt.Fprintf(out, "Verified %d copies: spec, labels and annotations equal the source's.\n", written)
	}

	deleted := 0
	toDelete := len(objs) - len(kept)
	for _, k := range DeletionOrder(batches) {
		if kept[k] {
			fmt.Fprintf(out, "  kept %s in the source (cluster-scoped, possibly shared)\n", k)
			continue
		}
		if err := src.remove(ctx, byKey[k]); err != nil {
			return &Error{Step: "deleting", Object: k, Err: err}
		}
		deleted++
		fmt.Fprintf(out, "  [%d/%d] deleted %s from the source\n", deleted, toDelete, k)
		if o.After != nil {
			if err := o.After("delete", deleted, k); err != nil {
				return &Error{Step: "deleting", Object: k, Err: err}
			}
		}
	}

	unpaused, err := dst.finish(ctx)
	if err != nil {
		return &Error{Step: "unpausing", Err: err}
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
