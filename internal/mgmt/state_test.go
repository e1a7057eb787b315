package mgmt

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLockIsExclusiveAndReleased(t *testing.T) {
	dir := StateDir(t.TempDir())
	if running, _ := dir.Running(); running {
		t.Fatal("fresh directory reported running")
	}
	first, err := dir.TryLock()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dir.TryLock(); !errors.Is(err, ErrInUse) {
		t.Fatalf("second lock: %v, want ErrInUse", err)
	}
	running, pid := dir.Running()
	if !running || pid != os.Getpid() {
		t.Fatalf("Running() = %v, %d; want true, %d", running, pid, os.Getpid())
	}
	first.Release()
	if running, _ := dir.Running(); running {
		t.Fatal("still running after release")
	}
	again, err := dir.TryLock()
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	again.Release()
}

func TestPortsAreRememberedAndCanBeMoved(t *testing.T) {
	dir := StateDir(t.TempDir())
	first, err := dir.loadOrChoosePorts(0)
	if err != nil {
		t.Fatal(err)
	}
	if first.APIServer == 0 || first.EtcdClient == 0 || first.EtcdPeer == 0 {
		t.Fatalf("ports not all chosen: %+v", first)
	}
	second, err := dir.loadOrChoosePorts(0)
	if err != nil {
		t.Fatal(err)
	}
	if second != first {
		t.Fatalf("ports changed across starts: %+v then %+v", first, second)
	}
	moved, err := dir.loadOrChoosePorts(first.APIServer + 1)
	if err != nil {
		t.Fatal(err)
	}
	if moved.APIServer != first.APIServer+1 || moved.EtcdClient != first.EtcdClient || moved.EtcdPeer != first.EtcdPeer {
		t.Fatalf("--api-port moved more than the API server: %+v then %+v", first, moved)
	}
	if kept, _ := dir.loadOrChoosePorts(0); kept != moved {
		t.Fatalf("moved port not remembered: %+v", kept)
	}
}

func TestPrepareNamesTheDirectoryAndTheFix(t *testing.T) {
	blocker := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(blocker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	dir := StateDir(filepath.Join(blocker, "state"))
	err := dir.Prepare()
	if err == nil || !strings.Contains(err.Error(), string(dir)) || !strings.Contains(err.Error(), "--state-dir") {
		t.Fatalf("Prepare() = %v", err)
	}
}

// A state directory left open (by an older version, or by hand) is made
// 0700; a symbolic link or another user's directory is refused by name,
// with the fix.
func TestPrepareKeepsTheStateDirectoryPrivate(t *testing.T) {
	open := StateDir(filepath.Join(t.TempDir(), "open"))
	if err := os.Mkdir(string(open), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(string(open), 0o777); err != nil { // past the umask
		t.Fatal(err)
	}
	if err := open.Prepare(); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(string(open)); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("prepared state directory: %v, %v; want mode 0700", fi.Mode(), err)
	}

	link := StateDir(filepath.Join(t.TempDir(), "link"))
	if err := os.Symlink(string(open), string(link)); err != nil {
		t.Fatal(err)
	}
	if err := link.Prepare(); err == nil || !strings.Contains(err.Error(), "symbolic link") || !strings.Contains(err.Error(), "--state-dir") {
		t.Errorf("Prepare of a symbolic link = %v; want a refusal naming it and --state-dir", err)
	}

	if os.Getuid() != 0 {
		t.Log("not root: cannot make a directory of another user to check the owner")
		return
	}
	other := StateDir(filepath.Join(t.TempDir(), "other"))
	if err := os.Mkdir(string(other), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(string(other), 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if err := other.Prepare(); err == nil || !strings.Contains(err.Error(), "belongs to user 65534") || !strings.Contains(err.Error(), "--state-dir") {
		t.Errorf("Prepare of another user's directory = %v; want a refusal naming the owner and --state-dir", err)
	}
}

// Without $CAPSTAN_STATE_DIR, $XDG_STATE_HOME and $HOME there is no default
// state directory (no guessable one in /tmp), and an empty one is refused.
func TestNoSharedDefaultStateDir(t *testing.T) {
	t.Setenv("CAPSTAN_STATE_DIR", "")
	t.Setenv("XDG_STATE_HOME", "")
	t.Setenv("HOME", "")
	if d := DefaultStateDir(); d != "" {
		t.Errorf("DefaultStateDir() = %q without a home; want none", d)
	}
	if err := StateDir("").Prepare(); err == nil || !strings.Contains(err.Error(), "--state-dir") {
		t.Errorf("Prepare of no directory = %v; want a refusal naming --state-dir", err)
	}
}
