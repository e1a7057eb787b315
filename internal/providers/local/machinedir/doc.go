// Package machinedir is the contract between the local provider (the
// manager) and the processes it starts: a machine's `capstan node run` and a
// cluster's `capstan node lb`. They share nothing but a directory, so this
// package owns everything about it that more than one of them touches: the
// file names, the one Go type of each JSON file (machine.json, status.json,
// lb.json), reading and writing them (atomically: temporary file and rename,
// so a reader never sees half a file), and taking the lock that says a
// machine or load balancer runs (package lockfile; observers test it with
// lockfile.Held and friends on the path named here).
//
// docs/local-provider.md describes the directory for humans; what is on
// disk must stay readable by machines already running, so JSON field names
// here never change.
package machinedir
