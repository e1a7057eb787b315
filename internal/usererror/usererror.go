package usererror

import (
	"errors"
	"time"

	kerrors "k8s.io/apimachinery/pkg/util/errors"
)

// Error is a problem only a user can fix: a referenced kind that is not
// installed, a reference to nothing, configuration that cannot work. The
// reconcile records it in the status like any error, but comes back slowly
// (Retry) instead of with error backoff: retrying fast would not help, and
// the user's fix wakes the object through its watches anyway.
type Error struct{ Err error }

func (e *Error) Error() string { return e.Err.Error() }

// Unwrap returns the problem itself.
func (e *Error) Unwrap() error { return e.Err }

// Mark marks err as one only a user can fix; nil stays nil.
func Mark(err error) error {
	if err == nil {
		return nil
	}
	return &Error{Err: err}
}

// Retry is how soon an object whose reconcile failed with an Error is
// looked at again without an event.
const Retry = time.Minute

// Is tells whether err, or one it wraps or aggregates, is an Error.
func Is(err error) bool {
	var agg kerrors.Aggregate
	if errors.As(err, &agg) {
		// Aggregates do not unwrap; look at each error.
		for _, e := range agg.Errors() {
			if Is(e) {
				return true
			}
		}
		return false
	}
	var u *Error
	return errors.As(err, &u)
}
