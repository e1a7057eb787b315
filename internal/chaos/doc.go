// Package chaos puts faults into a running Capstan: it drives in-memory
// clusters through create, scale, a rolling upgrade (control plane and
// workers) and delete against a management plane (`capstan up
// --controllers=false`) whose controllers run in a separate `capstan
// manager` process, kills that manager with SIGKILL at seeded random points
// and the plane itself, brings both back, and then checks that everything
// converged: no duplicates, no orphans, no stuck finalizers, and every
// remaining cluster Available at its desired version and counts.
//
// The parts that decide are pure, so that they are tested on their own: the
// kill schedule is a function of the seed (Plan), and the invariants are
// functions over the listed objects (Check). Run is the driver that applies
// them to real processes; `capstan bench chaos` prints its figures and the
// package's test runs a short version in the suite.
package chaos
