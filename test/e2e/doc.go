// Package e2e drives the capstan binary as a user does — up, down, status,
// kill -9, kubectl-like reads — and checks what a user would check. The
// binary is $CAPSTAN_BIN (make test sets it) or built from the module.
//
// Most tests start planes of their own (their own state directory, API
// port and processes) and run in parallel; the few that use the shared
// plane env, or run managers against it, stay sequential. make test runs
// the QEMU provider's clusters on their own, after everything else: their
// emulated virtual machines need the host's cores.
package e2e
