// Package lockfile is Capstan's one way of telling whether a long-lived
// process runs: the process holds an exclusive flock on its lock file for its
// whole life, and the kernel drops the lock when the process dies, however it
// dies. Observers test the lock with a non-blocking shared flock that they
// release at once, find the holder's pid in /proc/locks, and learn of the
// holder's death by blocking on a shared flock.
//
// Its users: a local machine's node.lock and a local cluster's lb.lock (named
// by package machinedir, the local provider's machine directory contract),
// the management plane's capstan.lock (package mgmt), and (Wait) the build
// locks of the QEMU provider's caches.
package lockfile

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ErrHeld says another process holds the lock.
var ErrHeld = errors.New("lock is held by another process")

// Lock is an exclusive lock held by this process.
type Lock struct{ f *os.File }

// acquireRetry is how long Acquire keeps trying: an observer's shared test
// lock lasts microseconds, a running holder forever.
const acquireRetry = 500 * time.Millisecond

// Acquire takes the exclusive lock on path, creating the file with perm, and
// writes this process's pid into it (for humans and for Owner where
// /proc/locks names no holder). It fails with ErrHeld when another process
// holds the lock; it retries for a moment first, since an observer testing
// the lock holds it shared briefly.
func Acquire(path string, perm os.FileMode) (*Lock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, perm)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(acquireRetry)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("locking %s: %w", path, err)
		}
		if time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("%s: %w", path, ErrHeld)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &Lock{f: f}, nil
}

// Release drops the lock.
func (l *Lock) Release() error { return l.f.Close() }

// Held tells whether some process holds an exclusive lock on path. A missing
// file is not held. The test takes and drops a shared lock at once, so a
// process that takes its exclusive lock at that very instant must retry.
func Held(path string) (bool, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err != nil {
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return true, nil
		}
		return false, fmt.Errorf("testing lock %s: %w", path, err)
	}
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false, nil
}

// Holder returns the pid of the process holding an exclusive flock on path,
// or 0 when none does, read from /proc/locks by the file's inode.
func Holder(path string) (int, error) {
	fi, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, fmt.Errorf("%s: no inode information", path)
	}
	f, err := os.Open("/proc/locks")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	// Lines look like "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF";
	// the device is major:minor in hex, the inode in decimal.
	wantInode := strconv.FormatUint(st.Ino, 10)
	major, minor := (st.Dev>>8)&0xfff|(st.Dev>>32)&^0xfff, st.Dev&0xff|(st.Dev>>12)&^0xff
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		// A blocked waiter's line carries "->" after the number.
		if len(fields) < 6 || fields[1] == "->" || fields[1] != "FLOCK" || fields[3] != "WRITE" {
			continue
		}
		id := strings.Split(fields[5], ":")
		if len(id) != 3 || id[2] != wantInode {
			continue
		}
		maj, err1 := strconv.ParseUint(id[0], 16, 64)
		mnr, err2 := strconv.ParseUint(id[1], 16, 64)
		if err1 != nil || err2 != nil || maj != major || mnr != minor {
			continue
		}
		pid, err := strconv.Atoi(fields[4])
		if err != nil {
			continue
		}
		return pid, nil
	}
	return 0, s.Err()
}

// Owner returns the pid of the process holding path's lock, 0 when none
// does: from /proc/locks, or, where that names no holder (some filesystems,
// such as overlayfs, report another device there), from the pid the holder
// wrote into the file, provided the lock is held.
func Owner(path string) (int, error) {
	pid, err := Holder(path)
	if err != nil || pid != 0 {
		return pid, err
	}
	held, err := Held(path)
	if err != nil || !held {
		return 0, err
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	pid, err = strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		return 0, fmt.Errorf("%s is held but neither /proc/locks nor the file names its holder", path)
	}
	return pid, nil
}

// WaitReleased blocks until no process holds an exclusive lock on path (it
// returns at once when none does or the file is missing). It cannot be
// interrupted: run it in a goroutine of its own.
func WaitReleased(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("waiting for lock %s: %w", path, err)
		}
		return syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	}
}

// Wait takes an exclusive lock on path for a job only one process may do
// at a time (building a cached artifact), waiting, and telling waiting once,
// while another process holds it; the returned func releases it. Waiting
// retries every second: a blocking flock could not be given up when ctx
// ends.
func Wait(ctx context.Context, path string, waiting func()) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	told := false
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("locking %s: %w", path, err)
		}
		if !told {
			waiting()
			told = true
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}
