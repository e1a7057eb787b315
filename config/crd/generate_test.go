package crd_test

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"capstan.dev/capstan/internal/testenv"
)

// TestGeneratedFilesAreCurrent regenerates the deepcopy functions and CRDs in
// a scratch copy of the API packages and fails when the committed files
// differ: a change to the types must come with `make generate`.
func TestGeneratedFilesAreCurrent(t *testing.T) {
	if testing.Short() {
		t.Skip("runs controller-gen; skipped with -short")
	}
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	scratch := t.TempDir()
	for _, f := range []string{"go.mod", "go.sum"} {
		copyFile(t, filepath.Join(root, f), filepath.Join(scratch, f))
	}
	err = filepath.WalkDir(filepath.Join(root, "api"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		copyFile(t, path, filepath.Join(scratch, rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The Makefile's generate target, pointed at the scratch copy.
	for _, args := range [][]string{
		{"tool", "controller-gen", "object", "paths=./api/..."},
		{"tool", "controller-gen", "crd", "paths=./api/...", "output:crd:artifacts:config=config/crd/bases"},
	} {
		cmd := exec.Command("go", args...)
		cmd.Dir = scratch
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	compareTrees(t, root, scratch, "config/crd/bases", ".yaml")
	compareTrees(t, root, scratch, "api", "zz_generated.deepcopy.go")
}

func compareTrees(t *testing.T, root, scratch, dir, suffix string) {
	t.Helper()
	committed := generatedFiles(t, filepath.Join(root, dir), suffix)
	fresh := generatedFiles(t, filepath.Join(scratch, dir), suffix)
	for name, want := range fresh {
		got, ok := committed[name]
		switch {
		case !ok:
			t.Errorf("%s/%s is generated but not committed; run make generate", dir, name)
		case !bytes.Equal(got, want):
			t.Errorf("%s/%s is stale; run make generate", dir, name)
		}
	}
	for name := range committed {
		if _, ok := fresh[name]; !ok {
			t.Errorf("%s/%s is committed but no type generates it any more; delete it", dir, name)
		}
	}
}

func generatedFiles(t *testing.T, dir, suffix string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, suffix) {
			return err
		}
		body, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		files[rel] = body
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	body, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, body, 0o644); err != nil {
		t.Fatal(err)
	}
}
