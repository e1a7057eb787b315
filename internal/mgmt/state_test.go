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
