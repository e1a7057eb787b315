package vm

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// standIn starts a process that passes for the QEMU of dir (its command
// line names dir's disk as QEMU's does) and records its pid there.
func standIn(t *testing.T, dir string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sh", "-c", "read line", "file="+filepath.Join(dir, diskFile)+",if=virtio")
	// read blocks until the test ends: the pipe's writing end is held until
	// then, as a garbage-collected one would be closed and end the process.
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait(); stdin.Close() })
	if err := os.WriteFile(filepath.Join(dir, pidFile), []byte(strconv.Itoa(cmd.Process.Pid)), 0o600); err != nil {
		t.Fatal(err)
	}
	return cmd
}

func TestExited(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()

	ch, err := Exited(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
	default:
		t.Fatal("no VM ever ran in dir, yet the channel is open")
	}

	cmd := standIn(t, dir)
	if pid, _ := runningPID(dir); pid != cmd.Process.Pid {
		t.Fatalf("runningPID %d, want %d", pid, cmd.Process.Pid)
	}
	ch, err = Exited(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	chCancelled, err := Exited(cancelled, dir)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case <-ch:
		t.Fatal("closed while the process runs")
	case <-time.After(200 * time.Millisecond):
	}

	if err := syscall.Kill(cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("the process was killed and reaped 10s ago, the channel is still open")
	}
	select {
	case <-chCancelled:
		t.Error("a watch whose context ended closed its channel")
	default:
	}
	st, err := Inspect(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if st.Running || !strings.Contains(st.Exited, "unknown") {
		t.Errorf("Inspect after the process ended: %+v, want not running, exit status unknown (no exit file)", st)
	}
}

func TestRunningPIDIgnoresOtherProcesses(t *testing.T) {
	dir := t.TempDir()
	// The pid file names a live process that is not this VM's QEMU.
	if err := os.WriteFile(filepath.Join(dir, pidFile), []byte(strconv.Itoa(os.Getpid())), 0o600); err != nil {
		t.Fatal(err)
	}
	if pid, err := runningPID(dir); pid != 0 || err != nil {
		t.Errorf("runningPID %d, %v; want 0: the pid is not QEMU of this directory", pid, err)
	}
}
