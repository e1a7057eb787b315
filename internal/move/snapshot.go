package move

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Snapshot copies the clusters of source into dir as ToDirectory does, and
// keeps them in the source: the Clusters are paused while their objects
// are read and written (so that no controller acts between two reads and
// the copy is of one moment), then unpaused, also when the copy fails.
// The files keep the move's pause annotations, so that Restore creates
// the objects paused and unpauses them once all are there.
func Snapshot(ctx context.Context, source client.Client, dir string, o Options) error {
	objs, err := discover(ctx, source, o.Namespace)
	if err != nil {
		return &Error{Step: "reading", Err: err}
	}
	var moving []string
	for _, u := range objs {
		if _, ours := u.GetAnnotations()[pausedByMoveKey]; ours {
			moving = append(moving, keyOf(u).String())
		}
	}
	if len(moving) > 0 {
		sort.Strings(moving)
		return &Error{Step: "checking", Err: fmt.Errorf("a move of these objects has not finished (they carry %s): %s; run that `capstan move` again to finish it, then take the backup",
			pausedByMoveKey, strings.Join(moving, ", "))}
	}
	copyErr := run(ctx, keepingSource{newClusterSource(source, o)}, &dirTarget{dir: dir}, o)
	_, unpauseErr := (&clusterTarget{c: source, namespace: o.Namespace, uids: map[Key]types.UID{}}).finish(ctx)
	if unpauseErr != nil {
		unpauseErr = &Error{Step: "unpausing the source", Err: fmt.Errorf("%w; run the backup again, or remove spec.paused and the %s annotation from the Clusters by hand", unpauseErr, pausedByMoveKey)}
	}
	return errors.Join(copyErr, unpauseErr)
}

// keepingSource is a management cluster whose objects are copied, never
// deleted.
type keepingSource struct{ *clusterSource }

func (keepingSource) remove(context.Context, *unstructured.Unstructured) (bool, error) {
	return false, nil
}

// commit marks nothing: a snapshot deletes nothing, so there is no point
// after which it could not be undone.
func (keepingSource) commit(context.Context, []*unstructured.Unstructured) (bool, error) {
	return false, nil
}

func (keepingSource) committed([]*unstructured.Unstructured) bool { return false }

// Restore creates the objects of a directory Snapshot wrote in target, as
// FromDirectory does: created paused, with their status, and unpaused once
// every one is there, so that the target's controllers adopt them and
// create nothing anew. An object of the same name in the target that is
// not a copy of the snapshot's is refused before anything is written; a
// restore run again after an interruption continues.
func Restore(ctx context.Context, dir string, target client.Client, o Options) error {
	objs, err := (&dirSource{dir: dir, namespace: o.Namespace}).objects(ctx, false)
	if err != nil {
		return &Error{Step: "reading", Err: err}
	}
	t := &clusterTarget{c: target, namespace: o.Namespace, uids: map[Key]types.UID{}}
	var conflicts []string
	restored := 0
	for _, u := range objs {
		existing, err := t.get(ctx, u.GroupVersionKind(), keyOf(u))
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			continue // a kind not served is reported, with the fix, when the target is prepared
		}
		if err != nil {
			return &Error{Step: "checking the target", Object: keyOf(u), Err: err}
		}
		if existing.GetAnnotations()[sourceUIDKey] == u.GetAnnotations()[sourceUIDKey] {
			restored++ // by an earlier run
			continue
		}
		// The snapshot's own objects, still live, are not to be restored
		// over either: they differ from the snapshot's copies only by the
		// pause the snapshot took, which differences leaves out.
		original := string(existing.GetUID()) == u.GetAnnotations()[sourceUIDKey]
		if d := differences(u, existing); len(d) > 0 || original {
			conflicts = append(conflicts, keyOf(u).String())
		}
	}
	if len(conflicts) > 0 {
		sort.Strings(conflicts)
		return &Error{Step: "checking the target", Err: fmt.Errorf("the target already has objects of these names that are not the snapshot's: %s; nothing was written: delete them there, or restore into another management cluster",
			strings.Join(conflicts, ", "))}
	}
	if len(objs) > 0 && restored == len(objs) {
		// Every object is there: at most the unpausing was left undone
		// (and comparing with the snapshot's paused copies would fail
		// for those already unpaused).
		if _, err := t.finish(ctx); err != nil {
			return &Error{Step: "unpausing", Err: err}
		}
		return nil
	}
	return FromDirectory(ctx, dir, target, o)
}
