package local

import (
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"capstan.dev/capstan/internal/lockfile"
	"capstan.dev/capstan/internal/providers/local/machinedir"
)

func TestStopperEscalatesToTheProcessGroup(t *testing.T) {
	dir := t.TempDir()
	lock := filepath.Join(dir, machinedir.LockFile)
	t.Setenv(StubbornEnv, lock)
	pid, err := startDetached(os.Args[0], nil, dir, filepath.Join(dir, machinedir.LogFile))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { killGroup(pid) })
	deadline := time.Now().Add(10 * time.Second)
	for held, _ := lockfile.Held(lock); !held; held, _ = lockfile.Held(lock) {
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, machinedir.LogFile))
			t.Fatalf("the stubborn process never took its lock; its log:\n%s", log)
		}
		time.Sleep(20 * time.Millisecond)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "child.pid"))
	if err != nil {
		t.Fatal(err)
	}
	child, _ := strconv.Atoi(string(raw))

	const grace = 500 * time.Millisecond
	s := newStopper(grace)
	began := time.Now()
	for {
		done, err := s.stop(logr.Discard(), lock, 0)
		if err != nil {
			t.Fatal(err)
		}
		if done {
			break
		}
		if time.Since(began) > 10*time.Second {
			t.Fatal("the process outlived SIGKILL")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if took := time.Since(began); took < grace {
		t.Errorf("stopped after %v, before the grace period of a process that ignores SIGTERM", took)
	}
	deadline = time.Now().Add(5 * time.Second)
	for childAlive(child) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d of the machine's group survived", child)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// childAlive: the grandchild is reparented, so a zombie is as good as gone.
func childAlive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	for i := 0; i+2 < len(raw); i++ {
		if raw[i] == ')' {
			return raw[i+2] != 'Z'
		}
	}
	return true
}

func TestStopKillsWhatACrashedMachineLeft(t *testing.T) {
	dir := t.TempDir()
	lock := filepath.Join(dir, machinedir.LockFile)
	t.Setenv(StubbornEnv, lock)
	pid, err := startDetached(os.Args[0], nil, dir, filepath.Join(dir, machinedir.LogFile))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { killGroup(pid) })
	var child int
	deadline := time.Now().Add(10 * time.Second)
	for {
		if held, _ := lockfile.Held(lock); held {
			raw, _ := os.ReadFile(filepath.Join(dir, "child.pid"))
			if child, _ = strconv.Atoi(string(raw)); child > 0 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the stubborn process never took its lock")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The machine dies on its own; its child lives on in its session.
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for held, _ := lockfile.Held(lock); held; held, _ = lockfile.Held(lock) {
		time.Sleep(20 * time.Millisecond)
	}
	if !childAlive(child) {
		t.Fatal("the child died with its parent; the test proves nothing")
	}
	done, err := newStopper(time.Second).stop(logr.Discard(), lock, pid)
	if err != nil || !done {
		t.Fatalf("stop = %v, %v", done, err)
	}
	deadline = time.Now().Add(5 * time.Second)
	for childAlive(child) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d left by the crashed machine survived its deletion", child)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
