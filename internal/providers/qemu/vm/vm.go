package vm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"capstan.dev/capstan/internal/atomicfile"
	"capstan.dev/capstan/internal/lockfile"
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
	// CPUs, MemoryMiB and DiskGiB size the VM; zero means DefaultCPUs,
	// DefaultMemoryMiB, DefaultDiskGiB. The disk is the root file system,
	// which cloud-init grows to DiskGiB on first boot.
	CPUs      int
	MemoryMiB int
	DiskGiB   int
	Forwards  []Forward
	// Segment, when set, gives the VM a second NIC (eth1) on a network
	// its cluster's VMs share (see Segment).
	Segment *Segment
}

// Segment is a VM's place on an Ethernet segment switched in user space
// (package vswitch): QEMU sends the NIC's frames as datagrams from Socket
// to the switch's socket Switch, and receives them on Socket. Nothing on it
// leaves the host.
type Segment struct {
	Switch string
	Socket string
	// MAC is the NIC's address ("52:54:00:…"), unique on the segment.
	MAC string
	// Address is the guest's IPv4 address on eth1 with its prefix length
	// ("172.31.0.5/24"), configured statically by cloud-init.
	Address string
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

// Tools are the host programs a VM needs.
var Tools = []string{"qemu-system-x86_64", "qemu-img"}

// startTimeout bounds how long QEMU may take to open its QMP socket.
const startTimeout = 60 * time.Second

// Start starts the VM of spec.Dir unless it already runs (then it returns
// nil and changes nothing). It returns once QEMU has started and its QMP
// socket answers, not when the guest has booted.
//
// QEMU runs in a session of its own, so it outlives the caller; while the
// caller lives, it reaps QEMU and records how it ended (the exit file),
// which Inspect reports.
func Start(ctx context.Context, spec Spec) error {
	spec, err := complete(spec)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(spec.Dir, 0o700); err != nil {
		return err
	}
	if err := os.Chmod(spec.Dir, 0o700); err != nil {
		return err
	}
	lock, err := lockfile.Acquire(filepath.Join(spec.Dir, lockFile), 0o600)
	if err != nil {
		return fmt.Errorf("vm: starting %s: %w", spec.Dir, err)
	}
	defer lock.Release()
	if pid, _ := runningPID(spec.Dir); pid != 0 {
		return nil
	}
	if missing := image.MissingTools(Tools...); len(missing) > 0 {
		return fmt.Errorf("vm: running a VM needs %s on PATH: install the Debian packages qemu-system-x86 and qemu-utils", strings.Join(missing, ", "))
	}
	disk := filepath.Join(spec.Dir, diskFile)
	if _, err := os.Stat(disk); errors.Is(err, os.ErrNotExist) {
		// A restarted VM keeps its disk; a new one gets an overlay.
		if err := createOverlay(ctx, spec.Image.Disk, disk, spec.DiskGiB); err != nil {
			return err
		}
	}
	seed, err := seedISO(spec)
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(filepath.Join(spec.Dir, seedFile), seed, 0o600); err != nil {
		return err
	}
	for _, f := range []string{qmpSocket, exitFile, pidFile} {
		if err := os.Remove(filepath.Join(spec.Dir, f)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	// QEMU would create the console log with the umask's mode.
	console, err := os.OpenFile(filepath.Join(spec.Dir, consoleFile), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	console.Close()
	report, err := os.OpenFile(filepath.Join(spec.Dir, reportFile), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	report.Close()
	stderr, err := os.OpenFile(filepath.Join(spec.Dir, qemuLog), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	defer stderr.Close()

	cmd := exec.Command("qemu-system-x86_64", qemuArgs(spec)...)
	cmd.Dir = spec.Dir
	cmd.Stdout = stderr
	cmd.Stderr = stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("vm: starting QEMU: %w", err)
	}
	if err := os.WriteFile(filepath.Join(spec.Dir, pidFile), []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o600); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return err
	}
	done := make(chan struct{})
	reapers.Store(spec.Dir, done)
	go func() {
		defer close(done)
		defer reapers.CompareAndDelete(spec.Dir, done)
		err := cmd.Wait()
		_ = atomicfile.WriteFile(filepath.Join(spec.Dir, exitFile), []byte(exitReason(err)+"\n"), 0o600)
	}()

	wait, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	for {
		q, err := dialQMP(wait, spec.Dir)
		if err == nil {
			_, err = q.status()
			q.Close()
			if err == nil {
				return os.Chmod(filepath.Join(spec.Dir, qmpSocket), 0o600)
			}
		}
		select {
		case <-done:
			return fmt.Errorf("vm: QEMU exited at start: %s", lastLines(filepath.Join(spec.Dir, qemuLog), 5))
		case <-wait.Done():
			_ = cmd.Process.Kill()
			return fmt.Errorf("vm: QEMU's QMP socket did not answer within %s: %v", startTimeout, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// reapers holds, by VM directory, a channel closed once this process has
// reaped the QEMU it started there and recorded how it ended. Exited waits
// for it, so that whoever sees a VM end (Remove deleting its directory,
// Inspect reading why) comes after that record, never before.
var reapers sync.Map

// complete checks spec and fills in its defaults.
func complete(spec Spec) (Spec, error) {
	if spec.Dir == "" {
		return spec, errors.New("vm: Spec.Dir is empty: set the VM's own directory")
	}
	dir, err := filepath.Abs(spec.Dir)
	if err != nil {
		return spec, err
	}
	spec.Dir = dir
	for field, v := range map[string]string{"Dir": spec.Dir, "Image.Kernel": spec.Image.Kernel, "Image.Initrd": spec.Image.Initrd, "Image.Disk": spec.Image.Disk} {
		if strings.Contains(v, ",") {
			return spec, fmt.Errorf("vm: Spec.%s %q holds a comma, which QEMU's options cannot carry: use a path without one", field, v)
		}
	}
	for field, v := range map[string]string{"Image.Kernel": spec.Image.Kernel, "Image.Initrd": spec.Image.Initrd, "Image.Disk": spec.Image.Disk} {
		if v == "" {
			return spec, fmt.Errorf("vm: Spec.%s is empty: use the Image image.EnsureNode returns", field)
		}
	}
	if !hostnamePattern.MatchString(spec.Hostname) {
		return spec, fmt.Errorf("vm: Spec.Hostname %q must be a host name (1 to 63 letters, digits, '-' or '.')", spec.Hostname)
	}
	if spec.InstanceID == "" {
		return spec, errors.New("vm: Spec.InstanceID is empty: set an ID unique to this machine (cloud-init runs its first-boot steps once per ID)")
	}
	if spec.CPUs == 0 {
		spec.CPUs = DefaultCPUs
	}
	if spec.MemoryMiB == 0 {
		spec.MemoryMiB = DefaultMemoryMiB
	}
	if spec.DiskGiB == 0 {
		spec.DiskGiB = DefaultDiskGiB
	}
	if spec.CPUs < 0 || spec.MemoryMiB < 0 || spec.DiskGiB < 0 {
		return spec, fmt.Errorf("vm: Spec.CPUs, MemoryMiB and DiskGiB may not be negative (%d, %d, %d)", spec.CPUs, spec.MemoryMiB, spec.DiskGiB)
	}
	if seg := spec.Segment; seg != nil {
		if err := checkSegment(*seg); err != nil {
			return spec, err
		}
	}
	for _, f := range spec.Forwards {
		if f.HostPort < 1 || f.HostPort > 65535 || f.GuestPort < 1 || f.GuestPort > 65535 {
			return spec, fmt.Errorf("vm: Spec.Forwards %+v: ports must be within 1-65535", f)
		}
	}
	return spec, nil
}

// hostnamePattern is what Spec.Hostname may be: it becomes the guest's host
// name and QEMU's -name, where a comma would split the option.
var hostnamePattern = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9.-]{0,61}[A-Za-z0-9])?$`)

// createOverlay makes the VM's disk: a qcow2 file of sizeGiB that reads
// through to the image's disk for what the VM has not written.
func createOverlay(ctx context.Context, base, disk string, sizeGiB int) error {
	out, err := exec.CommandContext(ctx, "qemu-img", "create", "-q", "-f", "qcow2", "-F", "qcow2", "-b", base, disk, strconv.Itoa(sizeGiB)+"G").CombinedOutput()
	if err != nil {
		return fmt.Errorf("vm: creating the disk: qemu-img: %v: %s", err, bytes.TrimSpace(out))
	}
	return os.Chmod(disk, 0o600)
}

// exitReason says how the QEMU process ended, from its wait status.
func exitReason(err error) string {
	var exit *exec.ExitError
	if err == nil {
		return "QEMU exited with status 0"
	}
	if errors.As(err, &exit) {
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return fmt.Sprintf("QEMU was killed by signal %d (%s)", int(ws.Signal()), ws.Signal())
		}
		return fmt.Sprintf("QEMU exited with status %d", exit.ExitCode())
	}
	return "QEMU ended: " + err.Error()
}

// runningPID is the pid of the QEMU process of dir, 0 when none runs. The
// process must be QEMU using this directory's disk: a pid file outliving
// its process could otherwise name an unrelated process that got the pid.
func runningPID(dir string) (int, error) {
	b, err := os.ReadFile(filepath.Join(dir, pidFile))
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("vm: %s holds %q, not a pid", filepath.Join(dir, pidFile), b)
	}
	if !isQEMUOf(pid, dir) {
		return 0, nil
	}
	return pid, nil
}

// isQEMUOf says whether pid is a live (not zombie) QEMU process using the
// disk of dir.
func isQEMUOf(pid int, dir string) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name.
	if i := bytes.LastIndexByte(stat, ')'); i < 0 || i+2 >= len(stat) || stat[i+2] == 'Z' {
		return false
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return false
	}
	return bytes.Contains(cmdline, []byte("file="+filepath.Join(abs, diskFile)+","))
}

// Inspect reads the VM of dir: whether it runs, its pid and run state. For
// a VM that ran and is gone, Exited says why, as far as the directory
// tells: the exit status the starting process recorded, whether the guest
// powered off, and the last lines of QEMU's stderr.
func Inspect(ctx context.Context, dir string) (State, error) {
	pid, err := runningPID(dir)
	if err != nil {
		return State{}, err
	}
	if pid != 0 {
		st := State{Running: true, PID: pid}
		q, err := dialQMP(ctx, dir)
		if err != nil {
			return st, fmt.Errorf("vm: QEMU %d runs but its QMP socket does not answer: %w", pid, err)
		}
		defer q.Close()
		st.Status, err = q.status()
		return st, err
	}
	if _, err := os.Stat(filepath.Join(dir, pidFile)); errors.Is(err, os.ErrNotExist) {
		return State{}, nil // never started (or removed)
	}
	return State{Exited: exitDescription(dir)}, nil
}

// exitDescription tells why the QEMU of dir is gone.
func exitDescription(dir string) string {
	var parts []string
	if b, err := os.ReadFile(filepath.Join(dir, exitFile)); err == nil {
		parts = append(parts, strings.TrimSpace(string(b)))
	} else {
		parts = append(parts, "QEMU is gone; its exit status is unknown (the process that started it had ended)")
	}
	if strings.Contains(lastLines(filepath.Join(dir, consoleFile), 5), "reboot: Power down") {
		parts = append(parts, "the guest powered off")
	}
	if tail := lastLines(filepath.Join(dir, qemuLog), 3); tail != "" {
		parts = append(parts, "QEMU said: "+tail)
	}
	return strings.Join(parts, "; ")
}

// lastLines is the last n non-empty lines of a file, joined by " | ".
func lastLines(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	const window = 8192
	if fi, err := f.Stat(); err == nil && fi.Size() > window {
		_, _ = f.Seek(fi.Size()-window, 0)
	}
	buf := make([]byte, window)
	k, _ := f.Read(buf)
	var lines []string
	for _, l := range strings.Split(string(buf[:k]), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// Exited returns a channel closed when the QEMU process of dir exits (or at
// once when it does not run); it holds no lock and costs one goroutine and
// one file descriptor (a pidfd, which the runtime's poller wakes on exit),
// so a manager can wait on every VM without polling. When ctx ends first
// the watch stops and the channel stays open. When this process started the
// VM, the channel closes only after it has recorded how QEMU ended, so an
// Inspect that follows reports it.
func Exited(ctx context.Context, dir string) (<-chan struct{}, error) {
	ch := make(chan struct{})
	pid, err := runningPID(dir)
	if err != nil {
		return nil, err
	}
	if pid == 0 {
		close(ch)
		return ch, nil
	}
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if errors.Is(err, unix.ESRCH) {
		close(ch)
		return ch, nil
	}
	if err != nil {
		return nil, fmt.Errorf("vm: watching QEMU %d: %w", pid, err)
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	// The pid could have been reused between reading it and opening the
	// pidfd: check again now that the pidfd holds the process.
	if !isQEMUOf(pid, dir) {
		f.Close()
		close(ch)
		return ch, nil
	}
	raw, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { f.Close() })
	go func() {
		defer f.Close()
		err := raw.Read(func(fd uintptr) bool {
			// A pidfd is readable once its process has exited.
			p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			n, err := unix.Poll(p, 0)
			return err != nil || n > 0
		})
		if stop() && err == nil {
			if abs, err := filepath.Abs(dir); err == nil {
				if done, ok := reapers.Load(abs); ok {
					<-done.(chan struct{})
				}
			}
			close(ch)
		}
	}()
	return ch, nil
}

// Shutdown asks the guest to power off (ACPI, through QMP), waits up to
// grace, then ends QEMU (QMP quit, then SIGKILL). It is nil when the VM does
// not run.
func Shutdown(ctx context.Context, dir string, grace time.Duration) error {
	exited, err := Exited(ctx, dir)
	if err != nil {
		return err
	}
	select {
	case <-exited:
		return nil
	default:
	}
	pid, err := runningPID(dir)
	if err != nil || pid == 0 {
		return err
	}
	if q, err := dialQMP(ctx, dir); err == nil {
		_ = q.execute("system_powerdown", nil, nil)
		q.Close()
	}
	if waitFor(ctx, exited, grace) {
		return nil
	}
	if q, err := dialQMP(ctx, dir); err == nil {
		_ = q.execute("quit", nil, nil)
		q.Close()
	}
	if waitFor(ctx, exited, 5*time.Second) {
		return nil
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("vm: killing QEMU %d: %w", pid, err)
	}
	if waitFor(ctx, exited, 10*time.Second) {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return fmt.Errorf("vm: QEMU %d did not end after SIGKILL", pid)
}

// waitFor waits up to d for ch to close; false when it did not.
func waitFor(ctx context.Context, ch <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
		return false
	case <-ctx.Done():
		return false
	}
}

// Remove stops the VM (as Shutdown) and deletes dir with its disk; nothing of
// the VM is left: no process, disk or listening port.
func Remove(ctx context.Context, dir string, grace time.Duration) error {
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err := Shutdown(ctx, dir, grace); err != nil {
		return err
	}
	return os.RemoveAll(dir)
}

// ConsoleLog is the file the guest's serial console of dir goes to: the
// kernel's, systemd's and cloud-init's messages, for a human diagnosing a
// machine that does not come up.
func ConsoleLog(dir string) string { return filepath.Join(dir, consoleFile) }

// ReportLog is the file the guest's second serial port (ttyS1) goes to:
// the node image reports there how its bootstrap ended.
func ReportLog(dir string) string { return filepath.Join(dir, reportFile) }
