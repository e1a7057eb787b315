package image_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"capstan.dev/capstan/internal/oci"
	"capstan.dev/capstan/internal/providers/qemu/components"
	"capstan.dev/capstan/internal/providers/qemu/image"
	"capstan.dev/capstan/test/fixture"
)

// The node's containerd, run on the host with a root file system's store as
// its root, leaves an imported image there unpacked: the guest's containerd
// finds it without pulling or unpacking.
func TestImportImagesUnpacksIntoTheStore(t *testing.T) {
	if testing.Short() {
		t.Skip("builds containerd")
	}
	if os.Geteuid() != 0 {
		t.Skip("containerd's overlayfs snapshotter mounts: needs root")
	}
	ctx := context.Background()
	containerd, err := components.Build(ctx, components.Options{CacheDir: fixture.QEMUImageCache(t), Progress: func(s string) { t.Log(s) }}, components.ContainerdPart())
	if err != nil {
		t.Fatal(err)
	}
	files, err := image.Closure("/", "/bin/sh")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, oci.File{Path: "/hello", Mode: 0o644, Data: []byte("preloaded\n")})
	work := t.TempDir()
	archive := filepath.Join(work, "images.tar")
	f, err := os.Create(archive)
	if err != nil {
		t.Fatal(err)
	}
	if err := oci.WriteArchive(f, oci.Image{Name: "registry.k8s.io/capstan-preload:v1", Layers: [][]oci.File{files}, Config: oci.Config{Entrypoint: []string{"/bin/sh"}}}); err != nil {
		t.Fatal(err)
	}
	f.Close()
	root := filepath.Join(t.TempDir(), "var/lib/containerd")
	if err := image.ImportImages(ctx, containerd, root, work, archive); err != nil {
		t.Fatal(err)
	}
	found, _ := filepath.Glob(filepath.Join(root, "io.containerd.snapshotter.v1.overlayfs/snapshots/*/fs/hello"))
	if len(found) != 1 {
		t.Fatalf("the image's layer is not unpacked in the store: %v", found)
	}
	if data, _ := os.ReadFile(found[0]); string(data) != "preloaded\n" {
		t.Fatalf("unpacked file holds %q", data)
	}
	if _, err := os.Stat(filepath.Join(root, "io.containerd.metadata.v1.bolt/meta.db")); err != nil {
		t.Fatalf("no metadata database in the store: %v", err)
	}
	if entries, _ := os.ReadDir(work); len(entries) > 0 {
		for _, e := range entries {
			if e.Name() == "containerd.sock" {
				t.Errorf("containerd's socket is left behind: containerd was not stopped")
			}
		}
	}
}
