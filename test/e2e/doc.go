// Package e2e drives the capstan binary as a user does — up, down, status,
// kill -9, kubectl-like reads — and checks what a user would check. The
// binary is $CAPSTAN_BIN (make test sets it) or built from the module.
package e2e
