package image

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"capstan.dev/capstan/internal/oci"
	"capstan.dev/capstan/internal/providers/qemu/components"
)

// imagePath is the PATH of the control-plane images: kubeadm's static Pods
// name their programs (kube-apiserver, etcd) without a directory.
const imagePath = "PATH=/usr/local/bin:/usr/local/sbin:/usr/bin:/usr/sbin:/bin:/sbin"

// proxyTools are the guest files kube-proxy runs in its container
// (iptables mode): iptables and its extensions, from the guest's Debian.
var proxyTools = []string{
	"/usr/sbin/iptables", "/usr/sbin/iptables-save", "/usr/sbin/iptables-restore",
	"/usr/sbin/ip6tables", "/usr/sbin/ip6tables-save", "/usr/sbin/ip6tables-restore",
	"/usr/lib/x86_64-linux-gnu/xtables",
}

// NodeImages are the container images a node image holds: those kubeadm of
// node's version pulls, under the names it pulls them by, and the echo
// program's, under components.EchoImage. The Kubernetes components share
// one layer (the multi-call binary) and differ by a link of their name to
// it; kube-proxy's adds iptables from rootfs (the guest's root file system).
// Exported so that a test can see what a node will hold without building
// one.
func NodeImages(rootfs string, node components.Node) ([]oci.Image, error) {
	kube := []oci.File{{Path: "/usr/local/bin/kube", Mode: 0o755, Source: node.Kube}}
	var images []oci.Image
	for _, name := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "kube-proxy"} {
		layers := [][]oci.File{kube, {{Path: "/usr/local/bin/" + name, Link: "kube"}}}
		if name == "kube-proxy" {
			tools, err := closure(rootfs, proxyTools...)
			if err != nil {
				return nil, err
			}
			layers = append(layers, tools)
		}
		images = append(images, oci.Image{
			Name: node.Images[name], Layers: layers,
			Config: oci.Config{Entrypoint: []string{"/usr/local/bin/" + name}, Env: []string{imagePath}},
		})
	}
	images = append(images,
		oci.Image{
			Name:   node.Images["etcd"],
			Layers: [][]oci.File{{{Path: "/usr/local/bin/etcd", Mode: 0o755, Source: node.Etcd}}},
			Config: oci.Config{Entrypoint: []string{"/usr/local/bin/etcd"}, Env: []string{imagePath}},
		},
		oci.Image{
			Name:   node.Images["coredns"],
			Layers: [][]oci.File{{{Path: "/coredns", Mode: 0o755, Source: node.CoreDNS}}},
			Config: oci.Config{Entrypoint: []string{"/coredns"}},
		},
		oci.Image{
			Name:   node.Images["pause"],
			Layers: [][]oci.File{{{Path: "/pause", Mode: 0o755, Source: node.Pause}}},
			Config: oci.Config{Entrypoint: []string{"/pause"}},
		},
		// A workload's image: its static program alone, run as nobody
		// (it listens on 8080, no privilege needed; a numeric user needs
		// no /etc/passwd).
		oci.Image{
			Name:   node.Images[components.EchoImageKey],
			Layers: [][]oci.File{{{Path: "/echo", Mode: 0o755, Source: node.Echo}}},
			Config: oci.Config{Entrypoint: []string{"/echo"}, User: "65534:65534"},
		},
	)
	// An image without a name would be imported but never found by
	// the Pods that name it: a Node not made by components.Ensure.
	for _, img := range images {
		if img.Name == "" {
			return nil, fmt.Errorf("image: the node of Kubernetes %s names no image for %s: build it with components.Ensure, which names every one", node.KubernetesVersion, img.Config.Entrypoint[0])
		}
	}
	return images, nil
}

// preloadImages puts NodeImages into the containerd store of rootfs,
// unpacked, as the guest's containerd will find them: the node's own
// containerd runs on the host for a moment with rootfs's store as its root
// and imports them. Unpacking on the host takes seconds; in an emulated
// guest it took minutes.
func preloadImages(ctx context.Context, rootfs string, node components.Node) error {
	images, err := NodeImages(rootfs, node)
	if err != nil {
		return err
	}
	// A unix socket's path must be short: a directory under /tmp, not the
	// cache.
	tmp, err := os.MkdirTemp("", "capstan-preload-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	archive := filepath.Join(tmp, "images.tar")
	f, err := os.Create(archive)
	if err != nil {
		return err
	}
	if err := oci.WriteArchive(f, images...); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return importImages(ctx, node.ContainerdDir, filepath.Join(rootfs, "var/lib/containerd"), tmp, archive)
}

// importImages runs containerd (of containerdDir) with root as its store
// and work as its state directory, imports archive into the namespace
// kubelet's images live in, and stops it.
func importImages(ctx context.Context, containerdDir, root, work, archive string) error {
	socket := filepath.Join(work, "containerd.sock")
	config := filepath.Join(work, "config.toml")
	// Only the store: no CRI service, no listener but the socket.
	if err := os.WriteFile(config, []byte(fmt.Sprintf("version = 3\nroot = %q\nstate = %q\ndisabled_plugins = ['io.containerd.grpc.v1.cri']\n\n[grpc]\n  address = %q\n",
		root, filepath.Join(work, "state"), socket)), 0o600); err != nil {
		return err
	}
	var logs strings.Builder
	daemon := exec.Command(filepath.Join(containerdDir, "containerd"), "--config", config)
	daemon.Stdout, daemon.Stderr = &logs, &logs
	if err := daemon.Start(); err != nil {
		return fmt.Errorf("starting containerd to load the images: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- daemon.Wait() }()
	defer func() {
		_ = daemon.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = daemon.Process.Kill()
			<-exited
		}
	}()
	ctr := func(args ...string) ([]byte, error) {
		return exec.CommandContext(ctx, filepath.Join(containerdDir, "ctr"), append([]string{"--address", socket, "--namespace", "k8s.io"}, args...)...).CombinedOutput()
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := ctr("version"); err == nil {
			break
		}
		select {
		case err := <-exited:
			exited <- err
			return fmt.Errorf("containerd, started to load the images, exited: %v\n%s", err, logs.String())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("containerd, started to load the images, did not answer in 30 s:\n%s", logs.String())
		}
	}
	if out, err := ctr("images", "import", archive); err != nil {
		return fmt.Errorf("ctr images import: %w\n%s\ncontainerd said:\n%s", err, out, logs.String())
	}
	return nil
}
