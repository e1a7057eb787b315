// Package pace keeps one controller's memory of its own writes, object by
// object, so that the patch helper can skip two kinds of write that would
// change nothing worth a request: one computed from a cached copy older than
// the controller's own last write (the cache has not caught up; the watch
// event of that write is on its way), and a status change that only reports
// and comes moments after the last status write, which waits and joins the
// next one. Writes are what a management cluster runs out of first; see
// docs/architecture.md for where pacing sits in a reconcile.
package pace
