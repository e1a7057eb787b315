// Package image builds the Debian images the QEMU provider's VMs boot and
// keeps them in a cache directory, once per recipe.
//
// EnsureNode builds the image of a real Kubernetes node of one version:
// Debian's base system (cloud-init, NoCloud only; systemd, nftables),
// upstream kubeadm, kubelet and kubectl, containerd and crictl (package
// components builds them from the Go module proxy), Debian's runc and CNI
// plugins, and kubeadm's container images already in containerd's store.
// The provider boots these only.
//
// Ensure builds the smaller guest of Capstan's own node programs (the
// Capstan binary on a read-only 9p share and a kubeadm shim running it),
// which the vm package's tests boot. docs/qemu-guest.md describes the
// recipes and the cache.
package image
