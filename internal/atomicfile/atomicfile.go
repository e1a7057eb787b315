// Package atomicfile writes files so that readers see either the old content
// or the new, never a half-written file: the data goes to a temporary file in
// the same directory, which is then renamed over the target. Files other
// processes read while they change (a local machine's status.json, the
// manager's machine.json, certificates, kubeconfigs) are written this way.
package atomicfile

import (
	"bytes"
	"os"
	"path/filepath"
)

// WriteFile replaces path in one rename, so that a crash never leaves a
// half-written file behind; missing parent directories are created 0700,
// since what is written this way is mostly keys and credentials (a writer
// that wants its directories open makes them first). The temporary file
// gets perm before the rename, so the content is never readable with wider
// permissions than asked for.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	// The rename itself survives a crash only once the directory is synced.
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// WriteFileIfChanged is WriteFile, skipped when path already holds exactly
// data with perm: a writer that runs on every reconcile then neither wakes
// the readers that watch the file nor wears the disk.
func WriteFileIfChanged(path string, data []byte, perm os.FileMode) error {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
		if fi, err := os.Stat(path); err == nil && fi.Mode().Perm() == perm {
			return nil
		}
	}
	return WriteFile(path, data, perm)
}
