package mgmt

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"capstan.dev/capstan/internal/atomicfile"
	"capstan.dev/capstan/internal/lockfile"
)

// DefaultStateDir is where the plane keeps its state when the user names no
// directory: $CAPSTAN_STATE_DIR, else $XDG_STATE_HOME/capstan, else
// ~/.local/state/capstan; "" when none of them is set. There is no shared
// fallback: a predictable directory in /tmp could be made by another user
// first.
func DefaultStateDir() string {
	if d := os.Getenv("CAPSTAN_STATE_DIR"); d != "" {
		return d
	}
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "capstan")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".local", "state", "capstan")
	}
	return ""
}

// StateDir is the directory that holds one management plane's state.
type StateDir string

func (d StateDir) path(name string) string { return filepath.Join(string(d), name) }

// KubeconfigPath is the admin kubeconfig the plane writes when it is ready.
func (d StateDir) KubeconfigPath() string { return d.path("kubeconfig") }

// LogPath is where a detached plane writes its log.
func (d StateDir) LogPath() string { return d.path("capstan.log") }

// LocalDir holds the local provider's machines and load balancers.
func (d StateDir) LocalDir() string { return d.path("local") }

func (d StateDir) lockPath() string     { return d.path("capstan.lock") }
func (d StateDir) portsPath() string    { return d.path("ports.json") }
func (d StateDir) runPath() string      { return d.path("run.json") }
func (d StateDir) etcdDir() string      { return d.path("etcd") }
func (d StateDir) pki() pki             { return pki{dir: d.path("pki")} }
func (d StateDir) apiserverDir() string { return d.path("apiserver") }

// Ports are the loopback ports a plane listens on. They are chosen once, on
// first start, and kept: etcd records its peer address in its data, and
// users keep kubeconfigs that name the API server's port.
type Ports struct {
	APIServer  int `json:"apiServer"`
	EtcdClient int `json:"etcdClient"`
	EtcdPeer   int `json:"etcdPeer"`
}

// RunInfo describes a running plane. It is written once the plane is ready
// and removed when it stops cleanly; after a crash it stays behind, and the
// lock tells that nobody runs.
type RunInfo struct {
	PID        int       `json:"pid"`
	Server     string    `json:"server"`
	Kubeconfig string    `json:"kubeconfig"`
	Since      time.Time `json:"since"`
	Version    string    `json:"version"`
}

// Prepare creates the state directory if needed and proves it writable,
// so that the failure is reported up front with the path and the fix instead
// of half-way through start-up.
func (d StateDir) Prepare() error {
	if d == "" {
		return errors.New("no state directory: pass --state-dir DIR")
	}
	if err := os.MkdirAll(string(d), 0o700); err != nil {
		return fmt.Errorf("cannot create state directory %s: %w; choose a writable one with --state-dir", d, err)
	}
	if err := d.checkPrivate(); err != nil {
		return err
	}
	probe, err := os.CreateTemp(string(d), ".write-probe-*")
	if err != nil {
		return fmt.Errorf("state directory %s is not writable: %w; fix its permissions or choose another with --state-dir", d, errors.Unwrap(err))
	}
	probe.Close()
	return os.Remove(probe.Name())
}

// checkPrivate refuses a state directory that is a symbolic link or
// belongs to another user, and makes it 0700 when it is more open: it holds
// the plane's keys, and one made by an older version, by hand or by someone
// else could be read or swapped by others.
func (d StateDir) checkPrivate() error {
	fi, err := os.Lstat(string(d))
	if err != nil {
		return err
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		target, _ := filepath.EvalSymlinks(string(d))
		return fmt.Errorf("state directory %s is a symbolic link (to %s): pass the real directory with --state-dir", d, target)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Getuid() {
		return fmt.Errorf("state directory %s belongs to user %d, not to you (%d): choose a directory of your own with --state-dir", d, st.Uid, os.Getuid())
	}
	if fi.Mode().Perm() != 0o700 {
		if err := os.Chmod(string(d), 0o700); err != nil {
			return fmt.Errorf("making state directory %s private (0700): %w", d, err)
		}
	}
	return nil
}

// Lock is an exclusive hold on a state directory: a lockfile lock, the same
// mechanism as a local machine's node.lock.
type Lock struct{ l *lockfile.Lock }

// ErrInUse is returned by TryLock when another process holds the directory.
var ErrInUse = errors.New("state directory in use")

// TryLock takes the state directory for this process. The kernel releases
// the hold when the process exits, however it exits, so a killed instance
// never blocks the next start.
func (d StateDir) TryLock() (*Lock, error) {
	l, err := lockfile.Acquire(d.lockPath(), 0o600)
	if errors.Is(err, lockfile.ErrHeld) {
		return nil, ErrInUse
	}
	if err != nil {
		return nil, fmt.Errorf("locking %s: %w", d.lockPath(), err)
	}
	return &Lock{l: l}, nil
}

// Release gives the directory up.
func (l *Lock) Release() {
	if l == nil || l.l == nil {
		return
	}
	_ = l.l.Release()
	l.l = nil
}

// Running tells whether a process holds the directory, and which.
func (d StateDir) Running() (bool, int) {
	if held, err := lockfile.Held(d.lockPath()); err != nil || !held {
		return false, 0
	}
	pid, _ := lockfile.Owner(d.lockPath())
	return true, pid
}

// ReadRunInfo reads what the running (or last crashed) plane recorded.
func (d StateDir) ReadRunInfo() (*RunInfo, error) {
	var ri RunInfo
	if err := readJSON(d.runPath(), &ri); err != nil {
		return nil, err
	}
	return &ri, nil
}

func (d StateDir) writeRunInfo(ri RunInfo) error { return writeJSON(d.runPath(), ri) }

func (d StateDir) clearRunInfo() { _ = os.Remove(d.runPath()) }

// loadOrChoosePorts returns the remembered ports, choosing free ones for
// whatever is not remembered yet; an explicit API server port overrides the
// remembered one (and is remembered in its place).
func (d StateDir) loadOrChoosePorts(apiServerPort int) (Ports, error) {
	var p Ports
	if err := readJSON(d.portsPath(), &p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return p, fmt.Errorf("reading %s: %w", d.portsPath(), err)
	}
	if apiServerPort != 0 {
		p.APIServer = apiServerPort
	}
	for _, port := range []*int{&p.APIServer, &p.EtcdClient, &p.EtcdPeer} {
		if *port != 0 {
			continue
		}
		free, err := freeLoopbackPort()
		if err != nil {
			return p, err
		}
		*port = free
	}
	return p, writeJSON(d.portsPath(), p)
}

// hasEtcdData tells whether etcd has ever run in this directory.
func (d StateDir) hasEtcdData() bool {
	_, err := os.Stat(filepath.Join(d.etcdDir(), "member"))
	return err == nil
}

// forgetPorts drops the remembered ports so that fresh ones are chosen.
func (d StateDir) forgetPorts() error {
	if err := os.Remove(d.portsPath()); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

func freeLoopbackPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free loopback port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(path, append(b, '\n'), 0o600)
}
