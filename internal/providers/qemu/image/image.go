// Package image builds the Debian guest image the QEMU provider boots, from
// Debian packages alone, once, and keeps it in a cache directory.
//
// CONTRACT SKELETON (base19): the exported API below is what the QEMU
// provider builds against; the implementation replaces the bodies. Keep
// these names and meanings; add what you need.
//
// In the guest the image provides: cloud-init (NoCloud), systemd, openssh,
// nftables; the Capstan binary at /opt/capstan/capstan (reaching the guest
// without rebuilding the base image when the binary changes); and
// /usr/local/bin/kubeadm, a shim running `/opt/capstan/capstan kubeadm "$@"`.
package image

import (
	"context"
	"errors"
)

// Image is a built guest image: a kernel and initrd for direct kernel boot
// and a qcow2 root disk to put overlays on. ID names its recipe.
type Image struct {
	ID     string
	Kernel string
	Initrd string
	Disk   string
	// CapstanBinary is the host file the guest sees at /opt/capstan/capstan.
	CapstanBinary string
}

// Options say where the cache is and how to report progress.
type Options struct {
	// CacheDir holds built images (under the state dir in production).
	CacheDir string
	// CapstanBinary is the binary the guest runs (os.Executable() in
	// production).
	CapstanBinary string
	// Progress, if set, is told each step ("building the guest image:
	// installing packages", …) as it starts.
	Progress func(step string)
}

// Ensure returns the image, building it first when the cache has none for
// the current recipe. Concurrent callers (two processes too) share one
// build.
func Ensure(ctx context.Context, o Options) (Image, error) {
	return Image{}, errors.New("image: not implemented yet")
}
