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

// The provider directory is found from the machine's place in the layout,
// and only where machine.json agrees with it.
func TestProviderDir(t *testing.T) {
	m := Machine{Namespace: "ns1", Cluster: "c1"}
	got, err := ProviderDir("/state/local/ns1/c1/machines/m1/", m)
	if err != nil || got != "/state/local" {
		t.Errorf("ProviderDir = %q, %v; want /state/local", got, err)
	}
	for _, dir := range []string{"/state/local/ns2/c1/machines/m1", "/state/local/ns1/c2/machines/m1", "/state/local/ns1/c1/other/m1", "/m1"} {
		if got, err := ProviderDir(dir, m); err == nil || got != "" {
			t.Errorf("ProviderDir(%s) = %q, %v; want an error", dir, got, err)
		}
	}
}
