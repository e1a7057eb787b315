// Package phase runs the steps of a reconcile. Each step reports an error or
// how soon the object wants looking at again; every step runs even when an
// earlier one failed (the status then says what went wrong where), and the
// results fold into one controller-runtime result.
package phase

import (
	"context"
	"time"

	kerrors "k8s.io/apimachinery/pkg/util/errors"
	ctrl "sigs.k8s.io/controller-runtime"

	"capstan.dev/capstan/internal/contract"
)

// Func is one step: it returns how soon to reconcile again (0 when only an
// event should wake the object) and any error.
type Func[S any] func(context.Context, S) (time.Duration, error)

// userErrorRetry is how soon an object waits again when a user must act
// (install a provider, fix a reference): retrying fast would not help.
const userErrorRetry = time.Minute

// Run runs the steps in order over s and folds their results: the soonest
// requested requeue, all errors aggregated. Errors only a user can fix
// become a slow requeue instead of a backoff storm.
func Run[S any](ctx context.Context, s S, steps ...Func[S]) (ctrl.Result, error) {
	var errs []error
	var requeue time.Duration
	for _, step := range steps {
		after, err := step(ctx, s)
		if err != nil {
			errs = append(errs, err)
		}
		requeue = Soonest(requeue, after)
	}
	err := kerrors.NewAggregate(errs)
	if err != nil && contract.IsUserError(err) {
		return ctrl.Result{RequeueAfter: userErrorRetry}, nil
	}
	return ctrl.Result{RequeueAfter: requeue}, err
}

// Soonest is the shorter of two requeue delays, where 0 means none.
func Soonest(a, b time.Duration) time.Duration {
	if a == 0 || (b > 0 && b < a) {
		return b
	}
	return a
}
