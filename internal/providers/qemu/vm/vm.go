// Package vm runs one QEMU virtual machine per directory: a qcow2 overlay on
// a shared base image, a NoCloud seed carrying the machine's cloud-init data,
// user-mode networking with loopback port forwards, and a QMP socket through
// which it is inspected and stopped. The QEMU process is detached so it
// outlives its caller; a later caller finds it again by its directory.
//
// CONTRACT SKELETON (base19): the exported API below is what the QEMU
// provider's controllers build against; the implementation replaces the
// bodies. Keep these names and meanings; add what you need.
package vm

import (
	"context"
	"errors"
	"time"

	"capstan.dev/capstan/internal/providers/qemu/image"
)

// Forward makes a guest TCP port reachable on the host at 127.0.0.1:HostPort.
type Forward struct {
	HostPort  int
	GuestPort int
}

// Spec is everything a VM is started from.
type Spec struct {
	// Dir is the VM's own directory: overlay disk, seed, QMP socket,
	// serial console log, pid file. Created if missing, mode 0700.
	Dir   string
	Image image.Image
	// Hostname and InstanceID go into the NoCloud meta-data
	// (local-hostname, instance-id); MetaData adds further keys (the
	// provider puts provider-id there, which cloud-init's jinja exposes
	// as ds.meta_data.provider_id).
	Hostname   string
	InstanceID string
	MetaData   map[string]string
	// UserData is the machine's bootstrap data, verbatim.
	UserData []byte
	// VendorData is the provider's own cloud-config (its networking
	// set-up), run by cloud-init beside the user-data. May be empty.
	VendorData []byte
	CPUs       int
	MemoryMiB  int
	Forwards   []Forward
}

// State is what a VM's directory says about it.
type State struct {
	// Running is true while the QEMU process of Dir lives.
	Running bool
	PID     int
	// Status is QMP's run state ("running", "paused", "shutdown", …) when
	// Running.
	Status string
	// Exited says why a VM that ran is gone ("powered off", "killed by
	// signal 9", the last lines of QEMU's stderr), when known.
	Exited string
}

// ErrNotImplemented marks the skeleton.
var ErrNotImplemented = errors.New("vm: not implemented yet")

// Start starts the VM of spec.Dir unless it already runs (then it returns
// nil and changes nothing). It returns once QEMU has started and its QMP
// socket answers, not when the guest has booted.
func Start(ctx context.Context, spec Spec) error { return ErrNotImplemented }

// Inspect reads the VM of dir: whether it runs, its pid and run state.
func Inspect(ctx context.Context, dir string) (State, error) { return State{}, ErrNotImplemented }

// Exited returns a channel closed when the QEMU process of dir exits (or at
// once when it does not run); it holds no lock and costs one goroutine and
// one connection, so a manager can wait on every VM without polling.
func Exited(ctx context.Context, dir string) (<-chan struct{}, error) { return nil, ErrNotImplemented }

// Shutdown asks the guest to power off (ACPI, through QMP), waits up to
// grace, then ends QEMU. It is nil when the VM does not run.
func Shutdown(ctx context.Context, dir string, grace time.Duration) error { return ErrNotImplemented }

// Remove stops the VM (as Shutdown) and deletes dir with its disk; nothing of
// the VM is left: no process, disk or listening port.
func Remove(ctx context.Context, dir string, grace time.Duration) error { return ErrNotImplemented }
