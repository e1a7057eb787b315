package kit

import (
	"context"
	"time"

	kerrors "k8s.io/apimachinery/pkg/util/errors"
	ctrl "sigs.k8s.io/controller-runtime"
)

// Step is one step: it returns how soon to reconcile again (0 when only an
// event should wake the object) and any error.
type Step[S any] func(context.Context, S) (time.Duration, error)

// Steps runs the steps in order over s, every one even when an earlier one
// failed (the status then says what went wrong where), and folds their
// results: the soonest requested requeue, all errors aggregated.
func Steps[S any](ctx context.Context, s S, steps ...Step[S]) (ctrl.Result, error) {
	var errs []error
	var requeue time.Duration
	for _, step := range steps {
		after, err := step(ctx, s)
		if err != nil {
			errs = append(errs, err)
		}
		requeue = Soonest(requeue, after)
	}
	return ctrl.Result{RequeueAfter: requeue}, kerrors.NewAggregate(errs)
}

// Soonest is the shorter of two requeue delays, where 0 means none.
func Soonest(a, b time.Duration) time.Duration {
	if a == 0 || (b > 0 && b < a) {
		return b
	}
	return a
}
