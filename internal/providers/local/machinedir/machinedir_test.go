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
