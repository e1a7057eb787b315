package local

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/go-logr/logr"

	localv1 "capstan.dev/capstan/api/infrastructure/local/v1beta2"
	"capstan.dev/capstan/internal/atomicfile"
	"capstan.dev/capstan/internal/lockfile"
	"capstan.dev/capstan/internal/providers/local/machinedir"
)

// LBProcess runs control-plane load balancers (`capstan node lb`) for a
// provider other than this one: the QEMU provider puts its clusters'
// endpoints on the same process and backend files as local clusters. One
// LBProcess serves every load balancer of a controller; each is known by
// its directory.
type LBProcess struct {
	binary  string
	stopper *stopper

	mu     sync.Mutex
	starts map[string]start // by directory
}

// NewLBProcess returns an LBProcess that starts binary as `node lb`.
func NewLBProcess(binary string) *LBProcess {
	return &LBProcess{binary: binary, stopper: newStopper(lbStopGrace), starts: map[string]start{}}
}

// LBState is what EnsureRunning found.
type LBState struct {
	// PID of the running load balancer, or of the one just started.
	PID int
	// Running: the process holds its lock. Listening: it accepts
	// connections on its port.
	Running, Listening bool
	// Reason and Message say why it is not listening yet (Reason is one of
	// the local provider's: Starting, Exited, WaitingForLoadBalancer).
	Reason, Message string
	// Recheck is when to look again, when not listening; the lock watcher
	// (WaitLBExit) usually wakes the caller sooner.
	Recheck time.Duration
}

// EnsureRunning writes cfg to dir/lb.json (cfg.MachinesDir's
// <name>/apiserver-endpoint files name the backends), starts the load
// balancer unless it runs, and reports whether it listens. A load balancer
// holds no state, so one that died is started again, as a cloud's would be.
// A running one reads a changed lb.json only when it starts again.
func (p *LBProcess) EnsureRunning(log logr.Logger, dir string, cfg machinedir.LBConfig) (LBState, error) {
	port := cfg.Port
	for _, d := range []string{dir, cfg.MachinesDir} {
		// The cluster's machines and load balancer are its owner's alone.
		if err := machinedir.PrivateDir(d); err != nil {
			return LBState{}, err
		}
	}
	if current, err := machinedir.ReadLBConfig(dir); err != nil || current != cfg {
		if err := machinedir.WriteLBConfig(dir, cfg); err != nil {
			return LBState{}, fmt.Errorf("writing %s: %w", filepath.Join(dir, machinedir.LBConfigFile), err)
		}
	}
	lockPath := filepath.Join(dir, machinedir.LBLockFile)
	held, err := lockfile.Held(lockPath)
	if err != nil {
		return LBState{}, err
	}
	if !held {
		p.mu.Lock()
		last, started := p.starts[dir]
		p.mu.Unlock()
		if started && time.Since(last.at) < startTimeout {
			if alive(last.pid) {
				return LBState{PID: last.pid, Reason: localv1.ProcessStartingReason, Message: "the load balancer is starting", Recheck: startingRecheck}, nil
			}
			return LBState{Reason: localv1.ProcessExitedReason, Recheck: startTimeout - time.Since(last.at),
				Message: fmt.Sprintf("the load balancer exited right after it started; see %s", filepath.Join(dir, machinedir.LBLogFile))}, nil
		}
		pid, err := startDetached(p.binary, []string{"node", "lb", "--dir", dir}, dir, filepath.Join(dir, machinedir.LBLogFile))
		if err != nil {
			return LBState{}, err
		}
		log.Info("Started the load balancer", "pid", pid, "port", port)
		p.mu.Lock()
		p.starts[dir] = start{pid: pid, at: time.Now()}
		p.mu.Unlock()
		return LBState{PID: pid, Reason: localv1.ProcessStartingReason, Message: "the load balancer is starting", Recheck: startingRecheck}, nil
	}
	p.mu.Lock()
	delete(p.starts, dir)
	p.mu.Unlock()
	pid, err := lockfile.Owner(lockPath)
	if err != nil {
		return LBState{}, err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port)))
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return LBState{PID: pid, Running: true, Reason: localv1.WaitingForLoadBalancerReason, Recheck: startingRecheck,
			Message: fmt.Sprintf("the load balancer does not listen on %s yet", addr)}, nil
	}
	conn.Close()
	return LBState{PID: pid, Running: true, Listening: true}, nil
}

// LBLockPath is the lock file the load balancer of dir holds while it runs:
// lockfile.WaitReleased on it returns when the process ends.
func LBLockPath(dir string) string { return filepath.Join(dir, machinedir.LBLockFile) }

// Stop moves the load balancer of dir towards its end (SIGTERM, then
// SIGKILL after a grace period) and tells whether it is gone; call it
// again until it is.
func (p *LBProcess) Stop(log logr.Logger, dir string) (bool, error) {
	done, err := p.stopper.stop(log, LBLockPath(dir), 0)
	if done {
		p.Forget(dir)
	}
	return done, err
}

// Forget drops what p remembers of the load balancer of dir (its start),
// once dir is gone.
func (p *LBProcess) Forget(dir string) {
	p.mu.Lock()
	delete(p.starts, dir)
	p.mu.Unlock()
}

// SetBackend makes backendsDir/name/apiserver-endpoint name address
// (host:port), so that the load balancer forwards to it once its /readyz
// answers; it writes nothing when the file already says so.
func SetBackend(backendsDir, name, address string) error {
	dir := filepath.Join(backendsDir, name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return atomicfile.WriteFileIfChanged(filepath.Join(dir, machinedir.APIServerEndpointFile), []byte(address+"\n"), 0o644)
}

// RemoveBackend withdraws backend name from backendsDir; the load
// balancer drops it at its next scan.
func RemoveBackend(backendsDir, name string) error {
	return os.RemoveAll(filepath.Join(backendsDir, name))
}
