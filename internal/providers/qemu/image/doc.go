// Package image builds the Debian guest image the QEMU provider boots, from
// Debian packages alone, once per recipe, and keeps it in a cache directory.
//
// In the guest the image provides: cloud-init (NoCloud only), systemd,
// openssh, nftables; the Capstan binary at /opt/capstan/capstan, a read-only
// 9p share of a per-binary directory, so a new Capstan build reaches the
// guest without rebuilding the image; and /usr/local/bin/kubeadm, a shim
// running `/opt/capstan/capstan kubeadm "$@"`. docs/qemu-guest.md describes
// the recipe and the cache.
package image
