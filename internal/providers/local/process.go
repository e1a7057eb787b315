package local

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"capstan.dev/capstan/internal/providers/local/lockfile"
)

// startDetached starts binary with args as a process of its own session
// (so it outlives the manager and signals to the manager's group miss it),
// stdin /dev/null, stdout and stderr appended to logPath. It returns the
// process's pid, which is also its process group id.
func startDetached(binary string, args []string, dir, logPath string) (int, error) {
	logFile, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return 0, err
	}
	defer logFile.Close()
	cmd := exec.Command(binary, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		// The log's existence means "started once": it must not outlive a
		// start that never happened.
		_ = os.Remove(logPath)
		return 0, fmt.Errorf("starting %s: %w", binary, err)
	}
	// Reap it when it exits while this manager runs; after a manager
	// restart the process is init's child and init reaps it.
	go func() { _ = cmd.Wait() }()
	return cmd.Process.Pid, nil
}

// stopper ends processes in steps across reconciles, without blocking a
// worker: SIGTERM first, SIGKILL of the whole process group once the grace
// period is over.
type stopper struct {
	grace time.Duration

	mu sync.Mutex
	// term records, per lock file, the holder that was sent SIGTERM and when.
	term map[string]termination
}

type termination struct {
	pid  int
	sent time.Time
}

func newStopper(grace time.Duration) *stopper {
	return &stopper{grace: grace, term: map[string]termination{}}
}

// stop moves the process holding lockPath towards its end. It returns true
// once no process holds the lock, false when the caller should look again
// shortly (the lock watcher also wakes it when the process dies).
func (s *stopper) stop(lockPath string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	held, err := lockfile.Held(lockPath)
	if err != nil {
		return false, err
	}
	t, signalled := s.term[lockPath]
	if !held {
		delete(s.term, lockPath)
		if signalled {
			// The leader is gone; whatever it left in its group goes too.
			// Only a group this stopper just ended: an old pid may have
			// been reused.
			killGroup(t.pid)
		}
		return true, nil
	}
	pid, err := lockfile.Holder(lockPath)
	if err != nil {
		return false, err
	}
	if pid <= 0 {
		return false, fmt.Errorf("%s is held but /proc/locks names no holder: end that process by hand", lockPath)
	}
	switch {
	case !signalled || t.pid != pid:
		s.term[lockPath] = termination{pid: pid, sent: time.Now()}
		if err := syscall.Kill(pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
			return false, fmt.Errorf("signalling process %d: %w", pid, err)
		}
	case time.Since(t.sent) > s.grace:
		killGroup(pid)
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	return false, nil
}

// killGroup kills every process of the group led by pid; the processes the
// provider starts lead their own group.
func killGroup(pid int) {
	if pid > 1 {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
}
