package atomicfile

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// Missing parent directories are their owner's alone, whatever the umask,
// and the file has the mode asked for.
func TestWriteFileMakesPrivateParents(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	root := t.TempDir()
	path := filepath.Join(root, "a", "b", "key")
	if err := WriteFile(path, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{filepath.Join(root, "a"), filepath.Join(root, "a", "b")} {
		fi, err := os.Stat(dir)
		if err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("parent %s: %v, %v; want mode 0700", dir, fi.Mode(), err)
		}
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("%s: %v, %v; want mode 0600", path, fi.Mode(), err)
	}
}
