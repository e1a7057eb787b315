package kit

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CacheWait bounds how long a reconcile waits for the cache to show its own
// creates and deletes, so that the next reconcile does not act on a stale
// picture (and, say, create a Machine twice).
const CacheWait = 10 * time.Second

// WaitForCache waits until reader (a cache) shows each of objs as seen
// accepts: what reader returned for it, and the error.
func WaitForCache[T client.Object](ctx context.Context, reader client.Reader, seen func(want, got client.Object, err error) bool, objs ...T) error {
	for _, obj := range objs {
		key := client.ObjectKeyFromObject(obj)
		err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, CacheWait, true, func(ctx context.Context) (bool, error) {
			got, ok := obj.DeepCopyObject().(client.Object)
			if !ok {
				return false, fmt.Errorf("%T is not an object", obj)
			}
			err := reader.Get(ctx, key, got)
			return seen(obj, got, err), nil
		})
		if err != nil {
			kind := obj.GetObjectKind().GroupVersionKind().Kind
			if kind == "" {
				kind = fmt.Sprintf("%T", obj)
			}
			return fmt.Errorf("waiting for the cache to show %s %s: %w", kind, key.Name, err)
		}
	}
	return nil
}

// Created accepts an object the cache has.
func Created(_, _ client.Object, err error) bool { return err == nil }

// Deleted accepts an object the cache no longer has, has as deleting, or
// has only as another object of the same name.
func Deleted(want, got client.Object, err error) bool {
	return apierrors.IsNotFound(err) || (err == nil && (got.GetUID() != want.GetUID() || !got.GetDeletionTimestamp().IsZero()))
}
