package local

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"

	"capstan.dev/capstan/internal/lockfile"
)

// startDetached starts binary with args as a process of its own session
// (so it outlives the manager and signals to the manager's group miss it),
// stdin /dev/null, stdout and stderr appended to logPath. It returns the
// process's pid, which is also its process group id.
func startDetached(binary string, args []string, dir, logPath string) (int, error) {
	logFile, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
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
// deadLeader is the pid the process last reported, 0 if unknown: when it
// died on its own earlier, processes it left in its session are killed.
func (s *stopper) stop(log logr.Logger, lockPath string, deadLeader int) (bool, error) {
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
			killGroup(t.pid)
			deadLeader = t.pid
		}
		if deadLeader > 1 {
			killSession(deadLeader)
		}
		return true, nil
	}
	pid, err := lockfile.Owner(lockPath)
	if err != nil {
		return false, err
	}
	if pid <= 0 {
		return false, fmt.Errorf("%s is held but its holder is unknown: end that process by hand", lockPath)
	}
	switch {
	case !signalled || t.pid != pid:
		s.term[lockPath] = termination{pid: pid, sent: time.Now()}
		log.Info("Stopping process", "pid", pid, "lock", lockPath)
		if err := syscall.Kill(pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
			return false, fmt.Errorf("signalling process %d: %w", pid, err)
		}
	case time.Since(t.sent) > s.grace:
		log.Info("Process outlived its grace period; killing its process group", "pid", pid, "grace", s.grace.String())
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

// killSession kills the processes left in the session a dead leader
// started (its pid is the session id): children of a machine that crashed.
// The leader itself is not touched: its pid may belong to a new process.
func killSession(sid int) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == sid {
			continue
		}
		raw, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// The fields after the command, which is in parentheses and may
		// hold spaces: state ppid pgrp session ...
		end := strings.LastIndexByte(string(raw), ')')
		if end < 0 {
			continue
		}
		fields := strings.Fields(string(raw[end+1:]))
		if len(fields) > 3 && fields[3] == strconv.Itoa(sid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}
