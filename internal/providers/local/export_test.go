package local

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"capstan.dev/capstan/internal/lockfile"
)

// StubbornEnv makes the test binary, run as a child, play a machine that
// ignores SIGTERM (see Stubborn).
const StubbornEnv = "CAPSTAN_TEST_STUBBORN_LOCK"

// Stubborn holds the lock file, ignores SIGTERM, starts a grandchild in its
// process group (its pid in child.pid next to the lock) and sleeps.
func Stubborn(lock string) {
	signal.Ignore(syscall.SIGTERM)
	child := exec.Command("sleep", "120")
	if err := child.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	_ = os.WriteFile(filepath.Join(filepath.Dir(lock), "child.pid"), []byte(fmt.Sprint(child.Process.Pid)), 0o644)
	if _, err := lockfile.Acquire(lock, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	time.Sleep(2 * time.Minute)
	os.Exit(0)
}
