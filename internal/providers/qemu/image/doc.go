// Package image builds the Debian images the QEMU provider's VMs boot and
// keeps them in a cache directory, once per recipe.
//
// EnsureNode builds the image of a real Kubernetes node of one version:
// Debian's base system (cloud-init, NoCloud only; systemd, nftables),
// upstream kubeadm, kubelet and kubectl, containerd and crictl (package
// components builds them from the Go module proxy), Debian's runc and CNI
// plugins, and kubeadm's container images already in containerd's store.
//
// docs/qemu-guest.md describes the recipe and the cache.
package image
