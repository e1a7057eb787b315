package image

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Image is a built guest image: a kernel and initrd for direct kernel boot
// and a qcow2 root disk to put overlays on. ID names its recipe.
type Image struct {
	ID     string
	Kernel string
	Initrd string
	Disk   string
}

// DefaultMirror is where the image's Debian packages come from unless
// NodeOptions.Mirror says otherwise.
const DefaultMirror = "http://deb.debian.org/debian"

// Suite is the Debian release the guest runs.
const Suite = "bookworm"

// Packages are installed into a node's image on top of Debian's "apt"
// variant (essential packages plus apt): the base system, runc
// (containerd's runtime) and the reference CNI plugins.
var Packages = []string{
	// dbus: without it systemd-logind does not run, and nothing acts on
	// the ACPI power button vm.Shutdown presses.
	"linux-image-amd64", "systemd-sysv", "udev", "dbus", "cloud-init", "openssh-server",
	"ifupdown", "isc-dhcp-client", "iproute2", "netbase", "ca-certificates",
	"nftables", "conntrack", "iptables", "ethtool", "socat", "kmod",
	"e2fsprogs", "procps", "curl",
	"runc", "containernetworking-plugins",
}

// BuildTools are the host programs EnsureNode needs to build an image.
var BuildTools = []string{"mmdebstrap", "mkfs.ext4", "qemu-img"}

// MissingTools returns the names of the given host programs that are not on
// PATH, each once (callers join lists that share programs).
func MissingTools(tools ...string) []string {
	var missing []string
	for _, t := range tools {
		if slices.Contains(missing, t) {
			continue
		}
		if _, err := exec.LookPath(t); err != nil {
			missing = append(missing, t)
		}
	}
	return missing
}

func built(img Image) bool {
	for _, f := range []string{img.Kernel, img.Initrd, img.Disk} {
		if _, err := os.Stat(f); err != nil {
			return false
		}
	}
	return true
}

// guestFile is a file the build writes into the root file system.
type guestFile struct {
	path    string
	mode    os.FileMode
	content string
}

// maskedUnits run periodic jobs a short-lived guest does not need, each
// costing seconds of emulated CPU.
var maskedUnits = []string{
	"apt-daily.timer", "apt-daily-upgrade.timer", "e2scrub_all.timer", "e2scrub_reap.service",
	"fstrim.timer", "man-db.timer", "systemd-networkd-wait-online.service",
}

// installPackages makes rootfs a Debian system of the given packages.
func installPackages(ctx context.Context, rootfs, mirror string, packages []string, progress func(string)) error {
	progress("installing Debian packages (mmdebstrap)")
	args := []string{
		"--mode=root", "--variant=apt", "--format=directory",
		"--include=" + strings.Join(packages, ","),
		"--aptopt=Acquire::Retries \"3\"",
		"--dpkgopt=path-exclude=/usr/share/man/*",
		"--dpkgopt=path-exclude=/usr/share/doc/*",
		"--dpkgopt=path-exclude=/usr/share/locale/*",
		"--customize-hook=chroot \"$1\" systemctl mask " + strings.Join(maskedUnits, " "),
		Suite, rootfs, mirror,
	}
	return run(ctx, "mmdebstrap", args...)
}

// writeGuestFiles writes files into rootfs, making their directories.
func writeGuestFiles(rootfs string, files []guestFile) error {
	for _, f := range files {
		p := filepath.Join(rootfs, f.path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(f.content), f.mode); err != nil {
			return err
		}
		if err := os.Chmod(p, f.mode); err != nil {
			return err
		}
	}
	return nil
}

// finish takes the kernel and initrd out of rootfs and turns rootfs into
// the qcow2 disk, deleting it.
func finish(ctx context.Context, dir, rootfs string, progress func(string)) error {
	progress("extracting the kernel")
	if err := copyNewest(filepath.Join(rootfs, "boot"), "vmlinuz-", filepath.Join(dir, "vmlinuz")); err != nil {
		return err
	}
	if err := copyNewest(filepath.Join(rootfs, "boot"), "initrd.img-", filepath.Join(dir, "initrd.img")); err != nil {
		return err
	}
	progress("writing the root file system")
	used, err := treeSize(rootfs)
	if err != nil {
		return err
	}
	// Room for the first boot's writes; each VM's overlay is larger and
	// cloud-init grows the file system to it.
	size := used + used/4 + 512<<20
	size = (size + 1<<20 - 1) &^ (1<<20 - 1)
	raw := filepath.Join(dir, "disk.raw")
	if err := run(ctx, "mkfs.ext4", "-q", "-F", "-L", "capstan-root", "-d", rootfs, raw, fmt.Sprintf("%dM", size>>20)); err != nil {
		return err
	}
	if err := removeBuildDir(rootfs); err != nil {
		return err
	}
	progress("converting the disk to qcow2")
	if err := run(ctx, "qemu-img", "convert", "-f", "raw", "-O", "qcow2", raw, filepath.Join(dir, "disk.qcow2")); err != nil {
		return err
	}
	if err := os.Remove(raw); err != nil {
		return err
	}
	// Overlays only read the base: nobody may write it.
	return os.Chmod(filepath.Join(dir, "disk.qcow2"), 0o444)
}

// copyNewest copies the file of dir whose name starts with prefix to dst;
// the image holds one kernel, so there is one.
func copyNewest(dir, prefix, dst string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var found string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) && e.Type().IsRegular() && e.Name() > found {
			found = e.Name()
		}
	}
	if found == "" {
		return fmt.Errorf("no %s* in %s: the kernel package did not install", prefix, dir)
	}
	data, err := os.ReadFile(filepath.Join(dir, found))
	if err != nil {
		return err
	}
	return os.WriteFile(dst, data, 0o644)
}

// treeSize adds up the sizes of the files under dir.
func treeSize(dir string) (int64, error) {
	var total int64
	err := filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		total += info.Size() + 4096
		return nil
	})
	return total, err
}

// removeBuildDir deletes a build directory, but never through a mount:
// mmdebstrap mounts the host's /proc, /sys and /dev inside the root file
// system while it installs, and a build it could not clean up after (killed)
// would leave them there. Those are unmounted first; if one cannot be, the
// directory stays.
func removeBuildDir(dir string) error {
	mounts, err := mountsUnder(dir)
	if err != nil {
		return err
	}
	for _, m := range mounts {
		if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil {
			return fmt.Errorf("image: %s is still mounted (%v): unmount it, then delete %s", m, err, dir)
		}
	}
	if mounts, err := mountsUnder(dir); err != nil || len(mounts) > 0 {
		return fmt.Errorf("image: %v are still mounted in %s (%v): unmount them, then delete it", mounts, dir, err)
	}
	return os.RemoveAll(dir)
}

// mountsUnder lists the mount points at or below dir, deepest first.
func mountsUnder(dir string) ([]string, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	var found []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		mp := unescapeMountPath(f[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			found = append(found, mp)
		}
	}
	sort.Slice(found, func(i, j int) bool { return len(found[i]) > len(found[j]) })
	return found, nil
}

// unescapeMountPath undoes mountinfo's octal escapes (\040 for a space, …).
func unescapeMountPath(s string) string {
	if !strings.Contains(s, "\\") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// run runs a build tool; its output is returned in the error when it fails.
// When ctx ends the tool gets SIGTERM, so that mmdebstrap unmounts what it
// mounted before it exits.
func run(ctx context.Context, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 2 * time.Minute
	out, err := cmd.CombinedOutput()
	if err != nil {
		tail := string(out)
		if len(tail) > 4000 {
			tail = "…" + tail[len(tail)-4000:]
		}
		return fmt.Errorf("%s: %w\n%s", name, err, tail)
	}
	return nil
}
