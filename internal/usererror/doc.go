// Package usererror marks the errors of a reconcile that only a user can
// fix, so that the reconcile kit retries them slowly instead of with error
// backoff, and lets any layer (the contract's reference resolution, the
// controllers) mark them without depending on the kit.
package usererror
