// Package install puts Capstan into a Kubernetes cluster, checks what is
// there, upgrades it and takes it out again; the `capstan init`, `capstan
// upgrade` and `capstan delete` commands are thin wrappers around it.
//
// An installation is internal/deploy's objects, applied with server-side
// apply under the field manager "capstan" (so a user's own fields on the
// same objects are kept, and re-running is harmless). The installed version
// is the deploy.VersionAnnotation on the capstan-system namespace.
//
// Upgrades migrate stored objects: for each of Capstan's CRDs whose
// status.storedVersions lists a version besides the storage version, every
// object is re-written unchanged, which makes the API server encode it in
// the storage version, and then storedVersions is set to the storage version
// alone. The steps are idempotent and need no progress record: a CRD whose
// storedVersions was already trimmed is finished and skipped, and re-writing
// an object that is already in the storage version changes nothing in etcd
// (the API server skips a write whose encoding is unchanged). So an upgrade
// interrupted anywhere resumes where it stopped when run again, and
// Pending tells whether one is unfinished.
package install
