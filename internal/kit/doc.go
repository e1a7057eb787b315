// Package kit is the one skeleton every Capstan reconciler runs in, core
// controllers and providers alike. A reconcile reads its object, skips a
// copy older than the controller's own last write, snapshots the object for
// the patch helper, gathers what it needs into a scope, runs its steps, and
// ends with one write of whatever changed (status paced, see package pace)
// and the soonest requeue any step asked for. Errors only a user can fix
// become a slow requeue with the reason in the status, not a backoff storm.
//
// A controller supplies the parts that are its own: how to gather its scope,
// what to do (pause, deletion, its steps) and how to report. The parts that
// must be the same everywhere live here once: the order of the plumbing, the
// stale check, the deferred write, the requeue arithmetic, the user-error
// type, the watch predicates every controller shares, and the registration
// (watches and mappings) of an infrastructure provider's cluster and machine
// controllers.
package kit
