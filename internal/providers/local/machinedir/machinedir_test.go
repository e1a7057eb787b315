package machinedir

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadLBConfigErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := ReadLBConfig(dir); err == nil {
		t.Fatal("missing lb.json accepted")
	}
	if err := os.WriteFile(filepath.Join(dir, LBConfigFile), []byte(`{"port": 0, "machinesDir": "/x"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadLBConfig(dir); err == nil || !strings.Contains(err.Error(), "port") {
		t.Fatalf("port 0: %v", err)
	}
}

// A machine directory made 0755 by an older version is its owner's alone
// once the manager writes the machine again.
func TestWriteMachineTightensAnOpenDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "old-machine")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil { // past the umask
		t.Fatal(err)
	}
	if err := WriteMachine(dir, Machine{ProviderID: "local:///x"}, []byte("data")); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o700 {
		t.Errorf("the machine directory has mode %v after WriteMachine, want 0700", fi.Mode().Perm())
	}
}
