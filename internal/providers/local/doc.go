// Package local is Capstan's local infrastructure provider: the
// LocalCluster, LocalMachine and LocalMachinePool controllers (a pool's
// instances are LocalMachines, made through internal/providers/pool). A
// LocalCluster is a control-plane load balancer process on a loopback port;
// a LocalMachine is a `capstan node run` process that boots from its
// Machine's bootstrap data. Both live in directories under Options.Dir,
// started detached so they outlive the manager; a restarted manager finds
// them again by their lock files. docs/local-provider.md is the contract
// with the processes.
//
// The controllers learn what the processes do without polling: fsnotify on
// each machine directory (status.json changes) and, per running process, a
// goroutine blocked on a shared flock of its lock file, which the kernel
// grants the moment the process dies. Both feed controller-runtime channel
// sources.
package local
