package kit

import (
	"errors"
	"time"

	kerrors "k8s.io/apimachinery/pkg/util/errors"
)

// UserError is a problem only a user can fix: a referenced kind that is not
// installed, a reference to nothing, configuration that cannot work. The
// reconcile records it in the status like any error, but comes back slowly
// (UserErrorRetry) instead of with error backoff: retrying fast would not
// help, and the user's fix wakes the object through its watches anyway.
type UserError struct{ Err error }

func (e *UserError) Error() string { return e.Err.Error() }

// Unwrap returns the problem itself.
func (e *UserError) Unwrap() error { return e.Err }

// UserFix marks err as one only a user can fix; nil stays nil.
func UserFix(err error) error {
	if err == nil {
		return nil
	}
	return &UserError{Err: err}
}

// UserErrorRetry is how soon an object whose reconcile failed with a
// UserError is looked at again without an event.
const UserErrorRetry = time.Minute

// IsUserError tells whether err, or one it wraps or aggregates, is a
// UserError.
func IsUserError(err error) bool {
	var agg kerrors.Aggregate
	if errors.As(err, &agg) {
		// Aggregates do not unwrap; look at each error.
		for _, e := range agg.Errors() {
			if IsUserError(e) {
				return true
			}
		}
		return false
	}
	var u *UserError
	return errors.As(err, &u)
}
