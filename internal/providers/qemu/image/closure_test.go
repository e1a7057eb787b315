package image

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"capstan.dev/capstan/internal/oci"
)

// The closure of a dynamically linked program of this Debian host, copied
// into an empty directory, runs there alone: the program, the links on the
// way to it (/bin → usr/bin, sh → dash), its libraries and its loader.
func TestClosureRunsAlone(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chroot needs root")
	}
	files, err := closure("/", "/bin/sh")
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, f := range files {
		paths = append(paths, f.Path)
	}
	for _, want := range []string{"/bin", "/usr/bin/sh", "/usr/bin/dash", "/usr/lib/x86_64-linux-gnu/libc.so.6"} {
		if !slices.Contains(paths, want) {
			t.Errorf("closure of /bin/sh lacks %s: %v", want, paths)
		}
	}
	root := t.TempDir()
	for _, f := range files {
		writeFile(t, root, f)
	}
	out, err := exec.Command("chroot", root, "/bin/sh", "-c", "echo alone").CombinedOutput()
	if err != nil || string(out) != "alone\n" {
		t.Fatalf("running the closure in an empty root: %v: %s", err, out)
	}
}

func writeFile(t *testing.T, root string, f oci.File) {
	t.Helper()
	p := filepath.Join(root, f.Path)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	switch {
	case f.Link != "":
		if err := os.Symlink(f.Link, p); err != nil {
			t.Fatal(err)
		}
	case f.Dir:
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
	default:
		data, err := os.ReadFile(f.Source)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, f.Mode); err != nil {
			t.Fatal(err)
		}
	}
}

func TestClosureNamesWhatIsMissing(t *testing.T) {
	if _, err := closure(t.TempDir(), "/usr/sbin/nothing"); err == nil {
		t.Fatal("a missing file gave no error")
	}
}
