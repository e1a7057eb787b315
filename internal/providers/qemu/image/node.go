package image

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"capstan.dev/capstan/internal/lockfile"
	"capstan.dev/capstan/internal/providers/qemu/components"
)

// NodeOptions say which real-node image to build, where the cache is, and
// how to report progress.
type NodeOptions struct {
	// CacheDir holds built images and node components.
	CacheDir string
	// KubernetesVersion is the version of the node's programs ("v1.35.8").
	KubernetesVersion string
	// Progress, if set, is told each step of a build as it starts.
	Progress func(step string)
	// Mirror is the Debian mirror; DefaultMirror when empty.
	Mirror string
	// Go is the go command that builds the node's programs; "go" on PATH
	// when empty.
	Go string
}

// nodeRecipeVersion changes whenever the real-node build below changes in a
// way that changes the image.
const nodeRecipeVersion = "1"

// nodeRecipeID names the real-node image of node: the recipe, the
// packages, the guest's files and the built programs (each part's cache
// directory is named by its content's recipe).
func nodeRecipeID(node components.Node) string {
	h := sha256.New()
	fmt.Fprintf(h, "node recipe %s\nsuite %s\n", nodeRecipeVersion, Suite)
	for _, p := range Packages {
		fmt.Fprintf(h, "package %s\n", p)
	}
	for _, f := range nodeGuestFiles(node) {
		fmt.Fprintf(h, "file %s %o %q\n", f.path, f.mode, f.content)
	}
	for _, p := range []string{node.Kube, node.Etcd, node.CoreDNS, node.Pause, node.ContainerdDir, node.Crictl, node.Echo} {
		fmt.Fprintf(h, "part %s\n", filepath.Base(filepath.Dir(p))+"/"+filepath.Base(p))
	}
	// kubeadm's image names follow from the Kubernetes version, already
	// hashed; the echo image's is Capstan's own and may change alone.
	fmt.Fprintf(h, "image %s %s\n", components.EchoImageKey, node.Images[components.EchoImageKey])
	unit, _ := os.ReadFile(node.ContainerdUnit)
	fmt.Fprintf(h, "containerd unit %q\n", unit)
	return "node-" + node.KubernetesVersion + "-" + hex.EncodeToString(h.Sum(nil))[:12]
}

// EnsureNode returns the image of a real Kubernetes node of the given
// version, building it first when the cache has none for the current
// recipe: upstream's kubeadm, kubelet and kubectl, containerd and runc, the
// CNI plugins, and kubeadm's container images already in containerd's
// store, so that kubeadm init and join pull nothing.
func EnsureNode(ctx context.Context, o NodeOptions) (Image, error) {
	if o.CacheDir == "" {
		return Image{}, errors.New("image: NodeOptions.CacheDir is empty: set the directory built images are kept in")
	}
	progress := o.Progress
	if progress == nil {
		progress = func(string) {}
	}
	node, err := components.Ensure(ctx, components.Options{CacheDir: o.CacheDir, Progress: progress, Go: o.Go}, o.KubernetesVersion)
	if err != nil {
		return Image{}, err
	}
	imagesDir := filepath.Join(o.CacheDir, "images")
	if err := os.MkdirAll(imagesDir, 0o755); err != nil {
		return Image{}, err
	}
	id := nodeRecipeID(node)
	img := Image{
		ID:     id,
		Kernel: filepath.Join(imagesDir, id, "vmlinuz"),
		Initrd: filepath.Join(imagesDir, id, "initrd.img"),
		Disk:   filepath.Join(imagesDir, id, "disk.qcow2"),
	}
	if built(img) {
		return img, nil
	}
	unlock, err := lockfile.Wait(ctx, filepath.Join(imagesDir, id+".lock"), func() {
		progress("waiting for another process building it")
	})
	if err != nil {
		return Image{}, err
	}
	defer unlock()
	if built(img) {
		return img, nil
	}
	mirror := o.Mirror
	if mirror == "" {
		mirror = DefaultMirror
	}
	if missing := MissingTools(BuildTools...); len(missing) > 0 {
		return Image{}, fmt.Errorf("image: building the guest image needs %s on PATH: install the Debian packages mmdebstrap, e2fsprogs and qemu-utils", strings.Join(missing, ", "))
	}
	tmp, err := os.MkdirTemp(imagesDir, ".build-"+id+"-")
	if err != nil {
		return Image{}, err
	}
	defer removeBuildDir(tmp)
	if err := buildNode(ctx, tmp, mirror, node, progress); err != nil {
		return Image{}, fmt.Errorf("image: building %s: %w", id, err)
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return Image{}, err
	}
	if err := os.Rename(tmp, filepath.Join(imagesDir, id)); err != nil {
		return Image{}, err
	}
	return img, nil
}

// buildNode makes the real-node image of node in dir.
func buildNode(ctx context.Context, dir, mirror string, node components.Node, progress func(string)) error {
	rootfs := filepath.Join(dir, "rootfs")
	if err := installPackages(ctx, rootfs, mirror, Packages, progress); err != nil {
		return err
	}
	progress("installing Kubernetes " + node.KubernetesVersion + ", containerd and crictl")
	if err := installPrograms(rootfs, node); err != nil {
		return err
	}
	if err := writeGuestFiles(rootfs, nodeGuestFiles(node)); err != nil {
		return err
	}
	if err := run(ctx, "chroot", rootfs, "systemctl", "enable", "containerd.service", "kubelet.service"); err != nil {
		return err
	}
	progress("loading kubeadm's images into containerd")
	if err := preloadImages(ctx, rootfs, node); err != nil {
		return err
	}
	return finish(ctx, dir, rootfs, progress)
}

// installPrograms copies the built programs into rootfs: the Kubernetes
// binary under each of its names in /usr/bin, containerd with its own unit
// file (which runs it from /usr/local/bin), and crictl.
func installPrograms(rootfs string, node components.Node) error {
	copies := map[string]string{"/usr/bin/kube": node.Kube, "/usr/bin/crictl": node.Crictl}
	for _, name := range []string{"containerd", "containerd-shim-runc-v2", "ctr"} {
		copies["/usr/local/bin/"+name] = filepath.Join(node.ContainerdDir, name)
	}
	for dst, src := range copies {
		if err := copyFile(src, filepath.Join(rootfs, dst), 0o755); err != nil {
			return err
		}
	}
	if err := copyFile(node.ContainerdUnit, filepath.Join(rootfs, "usr/lib/systemd/system/containerd.service"), 0o644); err != nil {
		return err
	}
	for _, name := range []string{"kubeadm", "kubelet", "kubectl"} {
		if err := os.Symlink("kube", filepath.Join(rootfs, "usr/bin", name)); err != nil {
			return err
		}
	}
	return nil
}

// copyFile copies src to dst with mode, making dst's directory.
func copyFile(src, dst string, mode os.FileMode) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(dst, data, mode); err != nil {
		return err
	}
	return os.Chmod(dst, mode)
}

// nodeGuestFiles are Capstan's additions to a real node's Debian system.
func nodeGuestFiles(node components.Node) []guestFile {
	return []guestFile{
		{"/etc/fstab", 0o644, "/dev/vda / ext4 defaults,errors=remount-ro 0 1\n"},
		// kubeadm's preflight checks want both, and containerd's overlayfs
		// snapshotter needs overlay.
		{"/etc/modules-load.d/kubernetes.conf", 0o644, "overlay\nbr_netfilter\n"},
		{"/etc/default/locale", 0o644, "LANG=C.UTF-8\n"},
		{"/etc/hostname", 0o644, "localhost\n"},
		{"/etc/machine-id", 0o444, ""},
		{"/etc/cloud/cloud.cfg.d/90-capstan.cfg", 0o644, "datasource_list: [ NoCloud, None ]\nlocale: C.UTF-8\n"},
		{"/etc/sysctl.d/90-kubernetes.conf", 0o644, "net.ipv4.ip_forward = 1\n" +
			"net.bridge.bridge-nf-call-iptables = 1\nnet.bridge.bridge-nf-call-ip6tables = 1\n"},
		// containerd for kubelet: systemd's cgroups (kubeadm's kubelet
		// default), the pause image kubeadm of this version lists as the
		// sandbox, and Debian's CNI plugins.
		{"/etc/containerd/config.toml", 0o644, "version = 3\n\n" +
			"[plugins.'io.containerd.cri.v1.images'.pinned_images]\n" +
			"  sandbox = '" + node.Images["pause"] + "'\n\n" +
			"[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]\n" +
			"  SystemdCgroup = true\n\n" +
			"[plugins.'io.containerd.cri.v1.runtime'.cni]\n" +
			"  bin_dirs = ['/usr/lib/cni']\n" +
			"  conf_dir = '/etc/cni/net.d'\n"},
		{"/etc/crictl.yaml", 0o644, "runtime-endpoint: unix:///run/containerd/containerd.sock\nimage-endpoint: unix:///run/containerd/containerd.sock\n"},
		{"/usr/lib/systemd/system/kubelet.service", 0o644, kubeletUnit},
		{"/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf", 0o644, kubeletKubeadmDropIn},
		// The bootstrap report: once cloud-init's final stage (which runs
		// the Machine's bootstrap data, kubeadm) has ended, one line on the
		// second serial port, which the host appends to the VM's report
		// file and the QEMU provider reads (readBootstrapReport). The
		// sentinel is Cluster API's bootstrap contract: the bootstrap data
		// touches it when kubeadm succeeded.
		{"/usr/local/sbin/capstan-bootstrap-report", 0o755, `#!/bin/sh
# Reports to the host, on ttyS1, how this machine's bootstrap ended: once,
# at the boot that ran it. The sentinel lives in /run, so at a later boot
# of the same disk it is gone though the bootstrap succeeded; the host
# keeps the first report.
sentinel=/run/cluster-api/bootstrap-success.complete
reported=/var/lib/capstan/bootstrap-reported
[ -e "$reported" ] && exit 0
# The unit runs after cloud-final.service; waiting again costs nothing and
# keeps the report final however the script was started.
cloud-init status --wait >/dev/null 2>&1
if [ -e "$sentinel" ]; then
	line='capstan-bootstrap: succeeded'
else
	# Why, on one short line: the last errors the bootstrap commands
	# printed (kubeadm's reason), then cloud-init's own account (status,
	# errors) without its timestamp.
	printed=$(grep -i -E 'error|fatal|timed out' /var/log/cloud-init-output.log 2>/dev/null | grep -v 'stack trace' | tail -n 3 | tr -s '[:space:]' ' ' | cut -c1-400)
	said=$(cloud-init status --long 2>&1 | sed '/^time:/d' | tr -s '[:space:]' ' ' | cut -c1-300)
	line="capstan-bootstrap: failed: cloud-init finished but $sentinel is missing; ${printed:+the bootstrap commands printed: ${printed% }; }cloud-init says: ${said% }"
fi
printf '%s\n' "$line" >/dev/ttyS1
mkdir -p "${reported%/*}" && : >"$reported"
`},
		{"/usr/lib/systemd/system/capstan-bootstrap-report.service", 0o644, `[Unit]
Description=Report the bootstrap's result to the host on ttyS1
# Pulled in by cloud-final.service (see its drop-in) and ordered after it,
# whether it succeeds or fails, so the report comes once bootstrap ended.
After=cloud-final.service

[Service]
Type=oneshot
ExecStart=/usr/local/sbin/capstan-bootstrap-report
TimeoutStartSec=infinity
`},
		// Enables the report with cloud-init's final stage. A drop-in, not
		// an enable symlink: systemd ignores a .wants/ entry that is not a
		// symlink, and guest files are regular files.
		{"/usr/lib/systemd/system/cloud-final.service.d/50-capstan-bootstrap-report.conf", 0o644, "[Unit]\nWants=capstan-bootstrap-report.service\n"},
	}
}

// kubeletUnit starts kubelet at boot and again whenever it stops: until
// kubeadm init or join has written its configuration, kubelet exits at
// once, and the unit keeps trying.
const kubeletUnit = `[Unit]
Description=kubelet: the Kubernetes node agent
Wants=network-online.target containerd.service
After=network-online.target containerd.service

[Service]
ExecStart=/usr/bin/kubelet
Restart=always
StartLimitInterval=0
RestartSec=10

[Install]
WantedBy=multi-user.target
`

// kubeletKubeadmDropIn gives kubelet the files kubeadm writes: the
// bootstrap and final kubeconfigs, the configuration file, and the flags
// kubeadm computes for this node (kubeadm-flags.env) or the user sets
// (/etc/default/kubelet, KUBELET_EXTRA_ARGS).
const kubeletKubeadmDropIn = `[Service]
Environment="KUBELET_KUBECONFIG_ARGS=--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf --kubeconfig=/etc/kubernetes/kubelet.conf"
Environment="KUBELET_CONFIG_ARGS=--config=/var/lib/kubelet/config.yaml"
EnvironmentFile=-/var/lib/kubelet/kubeadm-flags.env
EnvironmentFile=-/etc/default/kubelet
ExecStart=
ExecStart=/usr/bin/kubelet $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS
`
