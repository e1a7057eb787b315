package e2e

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// secretContent is what marks a file as holding credentials: a private
// key, a kubeconfig's embedded key or token, a kubeadm bootstrap token, an
// encryption key.
var secretContent = regexp.MustCompile(`PRIVATE KEY-----|client-key-data:|\btoken: |\b[a-z0-9]{6}\.[a-z0-9]{16}\b|secretbox:`)

// checkPrivateModes walks a state directory and reports every file that
// holds credentials and is readable by anyone but its owner, and every
// directory of the plane or a local machine that is not its owner's alone.
func checkPrivateModes(t *testing.T, stateDir string) {
	t.Helper()
	private := map[string]bool{stateDir: true, filepath.Join(stateDir, "pki"): true, filepath.Join(stateDir, "local"): true}
	checked := 0
	err := filepath.WalkDir(stateDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			// Files come and go while machines run.
			if os.IsNotExist(err) {
				return nil
			}
			return err
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		parent := filepath.Base(filepath.Dir(path))
		if d.IsDir() {
			// The plane's etcd keeps its own modes; its objects are
			// reached through the API server only.
			if path == filepath.Join(stateDir, "etcd") {
				return filepath.SkipDir
			}
			if (private[path] || parent == "machines" || d.Name() == "machines" || d.Name() == "lb") && info.Mode().Perm()&0o077 != 0 {
				t.Errorf("directory %s has mode %v, want 0700", path, info.Mode().Perm())
			}
			return nil
		}
		if !info.Mode().IsRegular() || info.Size() > 1<<20 {
			return nil
		}
		body, err := os.ReadFile(path)
		if err != nil {
			return nil
		}
		if secretContent.Match(body) || bytes.HasSuffix([]byte(path), []byte("bootstrap-data")) {
			checked++
			if info.Mode().Perm()&0o077 != 0 {
				t.Errorf("%s holds credentials (%q) and has mode %v, want 0600", path, secretContent.Find(body), info.Mode().Perm())
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Keys, kubeconfigs, bootstrap data and join configurations at least.
	if checked < 10 {
		t.Errorf("only %d files with credentials found under %s: the check looks in the wrong place", checked, stateDir)
	}
	t.Logf("%d files with credentials under %s are their owner's alone", checked, stateDir)
}
