package lockfile

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// The lock is per open file description, so a second Acquire in this same
// process already conflicts; a child process is needed only to test Holder
// against another pid.
func TestAcquireHeldHolderWait(t *testing.T) {
	path := filepath.Join(t.TempDir(), "node.lock")
	if held, err := Held(path); err != nil || held {
		t.Fatalf("missing file: held=%v err=%v", held, err)
	}
	l, err := Acquire(path, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if held, err := Held(path); err != nil || !held {
		t.Fatalf("after Acquire: held=%v err=%v", held, err)
	}
	if _, err := Acquire(path, 0o644); !errors.Is(err, ErrHeld) {
		t.Fatalf("second Acquire: want ErrHeld, got %v", err)
	}
	if pid, err := Holder(path); err != nil || pid != os.Getpid() {
		t.Fatalf("Holder = %d, %v; want %d", pid, err, os.Getpid())
	}
	if pid, err := Owner(path); err != nil || pid != os.Getpid() {
		t.Fatalf("Owner = %d, %v; want %d", pid, err, os.Getpid())
	}
	released := make(chan error, 1)
	go func() { released <- WaitReleased(path) }()
	select {
	case err := <-released:
		t.Fatalf("WaitReleased returned while held: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-released:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("WaitReleased did not return after Release")
	}
	if held, err := Held(path); err != nil || held {
		t.Fatalf("after Release: held=%v err=%v", held, err)
	}
	if pid, err := Holder(path); err != nil || pid != 0 {
		t.Fatalf("Holder after release = %d, %v", pid, err)
	}
}

func TestHolderIsOtherProcess(t *testing.T) {
	if _, err := exec.LookPath("flock"); err != nil {
		t.Skip("flock(1) not installed")
	}
	path := filepath.Join(t.TempDir(), "lb.lock")
	cmd := exec.Command("flock", "-x", path, "sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		pid, err := Holder(path)
		if err != nil {
			t.Fatal(err)
		}
		if pid != 0 {
			// flock(1) takes the lock and then execs sleep: same pid.
			if pid != cmd.Process.Pid {
				t.Fatalf("Holder = %d, want %d", pid, cmd.Process.Pid)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the child never held the lock")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := Acquire(path, 0o644); !errors.Is(err, ErrHeld) {
		t.Fatalf("Acquire while child holds it: %v", err)
	}
}

// A second caller waits for the first's lock, telling it waits, and gives
// up when its context ends.
func TestWaitWaits(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.lock")
	unlock, err := Wait(context.Background(), path, func() { t.Error("the first caller waited") })
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	waited := false
	if _, err := Wait(ctx, path, func() { waited = true }); err == nil || !waited {
		t.Fatalf("second lock while held: %v, waited %v; want it to wait, then fail with the context", err, waited)
	}
	unlock()
	unlock2, err := Wait(context.Background(), path, func() { t.Error("waited for a released lock") })
	if err != nil {
		t.Fatal(err)
	}
	unlock2()
}
