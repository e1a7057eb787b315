// Package ssa answers, without a request, whether a server-side apply would
// change an object, so that a controller can skip an apply that would change
// nothing (and a dry run, which costs a request too).
//
// An apply changes an object in two ways, and the package asks about both:
//
//   - Missing: does the object already hold every value the desired object
//     sets? A user's edit of a field the applier sets, or a new value from
//     the applier, fails this.
//   - Dropped: does the applier's record of what it applied (its
//     managedFields entry, in the fieldsV1 form) name a field the desired
//     object no longer sets? The apply would remove that field.
//
// Change asks both at once, for the whole object or below a path such as
// "spec". Values are JSON-shaped (maps, lists, scalars, as in
// unstructured.Unstructured); numbers compare by value whatever their Go
// type, because the API machinery decodes whole numbers as int64 and
// encoding/json as float64. The package is pure: no client, no clock.
package ssa
