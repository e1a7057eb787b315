package image

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A cache that holds the current recipe's image is used as it is, and the
// binary is staged per content: a new binary, a new directory; the same
// binary, the same one.
func TestEnsureUsesCacheAndStagesBinary(t *testing.T) {
	cache := t.TempDir()
	dir := filepath.Join(cache, "images", RecipeID())
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"vmlinuz", "initrd.img", "disk.qcow2"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(t.TempDir(), "capstan-under-another-name")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\necho one\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	var steps []string
	o := Options{CacheDir: cache, CapstanBinary: bin, Progress: func(s string) { steps = append(steps, s) }}
	img, err := Ensure(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) != 0 {
		t.Errorf("a cached image was built again: %v", steps)
	}
	if img.Disk != filepath.Join(dir, "disk.qcow2") || img.Kernel != filepath.Join(dir, "vmlinuz") || img.ID != RecipeID() {
		t.Errorf("image %+v", img)
	}
	if filepath.Base(img.CapstanBinary) != "capstan" {
		t.Errorf("staged binary %s: the guest runs /opt/capstan/capstan, so it must be named capstan", img.CapstanBinary)
	}
	if got, _ := os.ReadFile(img.CapstanBinary); string(got) != "#!/bin/sh\necho one\n" {
		t.Errorf("staged binary holds %q", got)
	}
	again, err := Ensure(context.Background(), o)
	if err != nil || again.CapstanBinary != img.CapstanBinary {
		t.Errorf("the same binary staged again at %s (%v), want %s", again.CapstanBinary, err, img.CapstanBinary)
	}
	if err := os.WriteFile(bin, []byte("#!/bin/sh\necho two\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	changed, err := Ensure(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if changed.CapstanBinary == img.CapstanBinary || changed.Disk != img.Disk {
		t.Errorf("a new binary: staged at %s (was %s), disk %s (was %s): want a new binary directory on the same disk",
			changed.CapstanBinary, img.CapstanBinary, changed.Disk, img.Disk)
	}
	if got, _ := os.ReadFile(img.CapstanBinary); string(got) != "#!/bin/sh\necho one\n" {
		t.Errorf("the binary a running VM uses changed: %q", got)
	}
}

func TestEnsureRefusesBadOptions(t *testing.T) {
	for name, o := range map[string]Options{
		"CacheDir":      {CapstanBinary: "/bin/sh"},
		"CapstanBinary": {CacheDir: t.TempDir()},
	} {
		if _, err := Ensure(context.Background(), o); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("no %s: error %v, want one naming it", name, err)
		}
	}
}

func TestRecipeID(t *testing.T) {
	id := RecipeID()
	if !strings.HasPrefix(id, "debian-"+Suite+"-") || id != RecipeID() {
		t.Errorf("RecipeID %q is not stable", id)
	}
	saved := Packages
	defer func() { Packages = saved }()
	Packages = append(append([]string(nil), saved...), "htop")
	if RecipeID() == id {
		t.Error("another package list, the same recipe ID")
	}
}

func TestUnescapeMountPath(t *testing.T) {
	if got := unescapeMountPath(`/a\040b\134c`); got != `/a b\c` {
		t.Errorf("got %q", got)
	}
	mounts, err := mountsUnder(t.TempDir())
	if err != nil || len(mounts) != 0 {
		t.Errorf("mounts under a new directory: %v, %v", mounts, err)
	}
}

// Staged binaries of old builds go once unused for an hour, unless a VM
// (a process naming the directory as QEMU's -virtfs does) still runs on one.
func TestPruneBinaries(t *testing.T) {
	dir := t.TempDir()
	old := time.Now().Add(-2 * binaryKeep)
	for _, name := range []string{"current", "recent", "stale", "in-use"} {
		if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		if name != "recent" {
			if err := os.Chtimes(filepath.Join(dir, name), old, old); err != nil {
				t.Fatal(err)
			}
		}
	}
	user := exec.Command("sh", "-c", "read line", "local,path="+filepath.Join(dir, "in-use")+",mount_tag=capstan")
	if _, err := user.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := user.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { user.Process.Kill(); user.Wait() }()
	pruneBinaries(dir, filepath.Join(dir, "current"), time.Now().Add(-binaryKeep))
	for name, kept := range map[string]bool{"current": true, "recent": true, "stale": false, "in-use": true} {
		_, err := os.Stat(filepath.Join(dir, name))
		if got := err == nil; got != kept {
			t.Errorf("%s kept %v, want %v", name, got, kept)
		}
	}
}

// MissingTools names each absent program once, however many of the joined
// lists name it, and never a program on PATH.
func TestMissingToolsNamesEachOnce(t *testing.T) {
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "present"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin)
	got := MissingTools("absent-a", "present", "absent-b", "absent-a")
	if strings.Join(got, ",") != "absent-a,absent-b" {
		t.Errorf("MissingTools = %v, want [absent-a absent-b]", got)
	}
}
