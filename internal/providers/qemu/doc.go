// Package qemu is Capstan's QEMU infrastructure provider: the QEMUCluster
// and QEMUMachine controllers. A QEMUCluster is a control-plane load
// balancer on a loopback port of the management host (the local
// provider's `capstan node lb` process and backend files, reused); a
// QEMUMachine is a QEMU virtual machine (package vm) booting the guest
// image (package image) with its Machine's bootstrap data as cloud-init
// user-data. Machines live in <Options.Dir>/<namespace>/<name>; the QEMU
// processes are detached and outlive the manager, which finds them again by
// their directories.
//
// The controllers learn of a dead process without polling: one goroutine
// per VM waits on vm.Exited, one per load balancer on its lock, and both
// feed controller-runtime channel sources. A dead VM is reported, never
// restarted: a MachineHealthCheck replaces its Machine.
//
// The decisions (ports, condition verdicts, deletion steps) are pure
// functions in decide.go, tested by tables.
package qemu
