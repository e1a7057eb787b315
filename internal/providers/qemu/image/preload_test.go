package image_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
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

// fakeNode is a Node as components.Ensure makes it, without building one:
// the image list reads only its paths and names.
func fakeNode() components.Node {
	return components.Node{
		KubernetesVersion: "v1.35.8",
		Kube:              "/cache/parts/kube-0/kube", Etcd: "/cache/parts/etcd-0/etcd",
		CoreDNS: "/cache/parts/coredns-0/coredns", Pause: "/cache/parts/pause-0/pause",
		Echo: "/cache/parts/echo-0/echo",
		Images: map[string]string{
			"kube-apiserver":          "registry.k8s.io/kube-apiserver:v1.35.8",
			"kube-controller-manager": "registry.k8s.io/kube-controller-manager:v1.35.8",
			"kube-scheduler":          "registry.k8s.io/kube-scheduler:v1.35.8",
			"kube-proxy":              "registry.k8s.io/kube-proxy:v1.35.8",
			"etcd":                    "registry.k8s.io/etcd:3.6.6-0",
			"coredns":                 "registry.k8s.io/coredns/coredns:v1.13.1",
			"pause":                   "registry.k8s.io/pause:3.10.1",
			components.EchoImageKey:   components.EchoImage,
		},
	}
}

// fakeProxyRoot is a guest root file system with the files kube-proxy's
// image takes from it (iptables), as data: not ELF, so they need nothing
// more.
func fakeProxyRoot(t *testing.T) string {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "usr/sbin"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"iptables", "iptables-save", "iptables-restore", "ip6tables", "ip6tables-save", "ip6tables-restore"} {
		if err := os.WriteFile(filepath.Join(root, "usr/sbin", p), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(root, "usr/lib/x86_64-linux-gnu/xtables"), 0o755); err != nil {
		t.Fatal(err)
	}
	return root
}

// A node holds, beside kubeadm's images, the echo program's under
// components.EchoImage: the workload the end-to-end tests deploy, which no
// registry could serve.
func TestNodeImagesIncludeEcho(t *testing.T) {
	node := fakeNode()
	images, err := image.NodeImages(fakeProxyRoot(t), node)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]oci.Image{}
	for _, img := range images {
		byName[img.Name] = img
	}
	for key, ref := range node.Images {
		if _, ok := byName[ref]; !ok {
			t.Errorf("no image %s (%s) among the preloaded ones", ref, key)
		}
	}
	if len(byName) != len(images) {
		t.Errorf("%d images under %d names", len(images), len(byName))
	}
	echo, ok := byName[components.EchoImage]
	if !ok {
		t.Fatalf("%s is not preloaded", components.EchoImage)
	}
	if len(echo.Layers) != 1 || len(echo.Layers[0]) != 1 {
		t.Fatalf("the echo image's layers are %+v; want its program alone", echo.Layers)
	}
	if f := echo.Layers[0][0]; f.Path != "/echo" || f.Source != node.Echo || f.Mode&0o111 == 0 {
		t.Errorf("the echo image holds %+v; want the executable %s at /echo", f, node.Echo)
	}
	if got := strings.Join(echo.Config.Entrypoint, " "); got != "/echo" {
		t.Errorf("the echo image runs %q; want /echo", got)
	}
}

// A Node that names no echo image (not made by components.Ensure) is
// refused, instead of importing an image no Pod can name.
func TestNodeImagesRefuseAnUnnamedImage(t *testing.T) {
	node := fakeNode()
	delete(node.Images, components.EchoImageKey)
	if _, err := image.NodeImages(fakeProxyRoot(t), node); err == nil || !strings.Contains(err.Error(), "/echo") || !strings.Contains(err.Error(), "components.Ensure") {
		t.Fatalf("err = %v; want a refusal that names /echo and components.Ensure", err)
	}
}
