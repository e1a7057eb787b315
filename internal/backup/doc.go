// Package backup is the file format of Capstan's snapshots and the schedule
// that takes them.
//
// A snapshot file is one header line naming the format, one line of JSON
// metadata (what the payload holds, when it was taken, whether it is
// encrypted) and the payload: a gzip-compressed tar archive. The
// payload of an embedded plane's snapshot holds an etcd snapshot and the
// plane's own credentials; that of another management cluster holds its
// Cluster API objects and their secrets, one YAML file per object as
// internal/move writes them.
//
// Snapshots hold secrets, so the file is written atomically with mode 0600,
// and may be sealed with AES-256-GCM under a key read from a file. The
// metadata line is authenticated with the payload, so neither can be
// altered or swapped without the key noticing; an unencrypted file ends
// with the SHA-256 of all that precedes it. Every check happens in Read, before
// the caller touches anything.
//
// Schedule takes a snapshot every interval into a directory and removes the
// oldest beyond a count, for `capstan up --backup-every`.
package backup
