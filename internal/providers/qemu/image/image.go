package image

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"capstan.dev/capstan/internal/lockfile"
)

// Image is a built guest image: a kernel and initrd for direct kernel boot
// and a qcow2 root disk to put overlays on. ID names its recipe.
type Image struct {
	ID     string
	Kernel string
	Initrd string
	Disk   string
	// CapstanBinary is the host file the guest sees at /opt/capstan/capstan.
	// It is a copy of Options.CapstanBinary, named "capstan", alone in a
	// directory named after its content's hash: the VM shares that
	// directory read-only with the guest (9p), which mounts it at
	// /opt/capstan. The file never changes, so the guest may cache it.
	CapstanBinary string
}

// Options say where the cache is and how to report progress.
type Options struct {
	// CacheDir holds built images (under the state dir in production).
	CacheDir string
	// CapstanBinary is the binary the guest runs (os.Executable() in
	// production).
	CapstanBinary string
	// Progress, if set, is told each step of a build ("installing Debian
	// packages (mmdebstrap)", …) as it starts; the caller says what is
	// being built.
	Progress func(step string)
	// Mirror is the Debian mirror packages come from; DefaultMirror when
	// empty. It is not part of the recipe: any mirror gives the same image.
	Mirror string
}

// DefaultMirror is where the image's Debian packages come from unless
// Options.Mirror says otherwise.
const DefaultMirror = "http://deb.debian.org/debian"

// Suite is the Debian release the guest runs.
const Suite = "bookworm"

// Packages are installed into the image on top of Debian's "apt" variant
// (essential packages plus apt).
var Packages = []string{
	// dbus: without it systemd-logind does not run, and nothing acts on
	// the ACPI power button vm.Shutdown presses.
	"linux-image-amd64", "systemd-sysv", "udev", "dbus", "cloud-init", "openssh-server",
	"ifupdown", "isc-dhcp-client", "iproute2", "netbase", "ca-certificates",
	"nftables", "conntrack", "iptables", "ethtool", "socat", "kmod",
	"e2fsprogs", "procps", "curl",
}

// recipeVersion changes whenever the build below changes in a way that
// changes the image, so that a new recipe gets a new ID and a fresh build.
const recipeVersion = "3"

// CapstanMountTag is the 9p mount tag the guest's fstab mounts at
// /opt/capstan; the VM must export the directory of Image.CapstanBinary
// under this tag.
const CapstanMountTag = "capstan"

// BuildTools are the host programs Ensure needs to build an image.
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

// RecipeID names the image the current recipe builds: the same ID means the
// same package list and build steps.
func RecipeID() string {
	h := sha256.New()
	fmt.Fprintf(h, "recipe %s\nsuite %s\n", recipeVersion, Suite)
	for _, p := range Packages {
		fmt.Fprintf(h, "package %s\n", p)
	}
	for _, f := range guestFiles() {
		fmt.Fprintf(h, "file %s %o %q\n", f.path, f.mode, f.content)
	}
	return "debian-" + Suite + "-" + hex.EncodeToString(h.Sum(nil))[:12]
}

// Ensure returns the image, building it first when the cache has none for
// the current recipe. Concurrent callers (two processes too) share one
// build: the first takes a lock file and builds in a temporary directory
// renamed into place when complete; the others wait for the lock and find
// the image.
func Ensure(ctx context.Context, o Options) (Image, error) {
	if o.CacheDir == "" {
		return Image{}, errors.New("image: Options.CacheDir is empty: set the directory built images are kept in")
	}
	if o.CapstanBinary == "" {
		return Image{}, errors.New("image: Options.CapstanBinary is empty: set the Capstan binary the guest runs (os.Executable())")
	}
	progress := o.Progress
	if progress == nil {
		progress = func(string) {}
	}
	imagesDir := filepath.Join(o.CacheDir, "images")
	if err := os.MkdirAll(imagesDir, 0o755); err != nil {
		return Image{}, err
	}
	bin, err := stageBinary(filepath.Join(o.CacheDir, "capstan"), o.CapstanBinary)
	if err != nil {
		return Image{}, err
	}
	pruneBinaries(filepath.Join(o.CacheDir, "capstan"), filepath.Dir(bin), time.Now().Add(-binaryKeep))
	id := RecipeID()
	img := Image{
		ID:            id,
		Kernel:        filepath.Join(imagesDir, id, "vmlinuz"),
		Initrd:        filepath.Join(imagesDir, id, "initrd.img"),
		Disk:          filepath.Join(imagesDir, id, "disk.qcow2"),
		CapstanBinary: bin,
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
	if built(img) { // another process built it while this one waited
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
	if err := build(ctx, tmp, mirror, progress); err != nil {
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

func built(img Image) bool {
	for _, f := range []string{img.Kernel, img.Initrd, img.Disk} {
		if _, err := os.Stat(f); err != nil {
			return false
		}
	}
	return true
}

// stageBinary copies the binary to dir/<hash>/capstan unless that copy
// exists, and returns its path. The copy is what the guest sees: a new
// build of Capstan gets a new directory, so the base image never changes
// for it and a running VM keeps the binary it started with.
func stageBinary(dir, src string) (string, error) {
	in, err := os.Open(src)
	if err != nil {
		return "", fmt.Errorf("image: the Capstan binary for the guest: %w", err)
	}
	defer in.Close()
	h := sha256.New()
	if _, err := io.Copy(h, in); err != nil {
		return "", fmt.Errorf("image: reading %s: %w", src, err)
	}
	final := filepath.Join(dir, hex.EncodeToString(h.Sum(nil))[:16])
	bin := filepath.Join(final, "capstan")
	if _, err := os.Stat(bin); err == nil {
		// Used now: pruneBinaries keeps what was used recently.
		now := time.Now()
		_ = os.Chtimes(final, now, now)
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(dir, ".stage-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	if _, err := in.Seek(0, io.SeekStart); err != nil {
		return "", err
	}
	out, err := os.OpenFile(filepath.Join(tmp, "capstan"), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return "", err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return "", err
	}
	if err := out.Close(); err != nil {
		return "", err
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, final); err != nil {
		if _, statErr := os.Stat(bin); statErr == nil {
			return bin, nil // another caller staged the same binary first
		}
		return "", err
	}
	return bin, nil
}

// binaryKeep is how long a staged binary no VM uses is kept after it was
// last staged or found: long enough for whoever called Ensure to start its
// VMs with it.
const binaryKeep = time.Hour

// pruneBinaries deletes the staged binaries of dir (each build of Capstan
// stages one, 160 MB) except keep, those staged or found since cutoff, and
// those a running process (a VM's QEMU) names on its command line.
func pruneBinaries(dir, keep string, cutoff time.Time) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	var inUse []byte
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		if b, err := os.ReadFile(filepath.Join("/proc", p.Name(), "cmdline")); err == nil {
			inUse = append(inUse, b...)
			inUse = append(inUse, 0)
		}
	}
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		info, err := e.Info()
		if err != nil || !e.IsDir() || path == keep || info.ModTime().After(cutoff) {
			continue
		}
		if bytes.Contains(inUse, []byte("path="+path+",")) {
			continue
		}
		_ = os.RemoveAll(path)
	}
}

// guestFile is a file the build writes into the root file system.
type guestFile struct {
	path    string
	mode    os.FileMode
	content string
}

// guestFiles are Capstan's additions to the Debian system.
func guestFiles() []guestFile {
	return []guestFile{
		{"/usr/local/bin/kubeadm", 0o755, "#!/bin/sh\n# Capstan's kubeadm: the Capstan binary shared by the host.\nexec /opt/capstan/capstan kubeadm \"$@\"\n"},
		// The root disk is the whole virtio disk (no partition table); the
		// Capstan binary's directory is a read-only 9p share. nofail: a
		// VM started without the share still boots.
		{"/etc/fstab", 0o644, "/dev/vda / ext4 defaults,errors=remount-ro 0 1\n" +
			CapstanMountTag + " /opt/capstan 9p trans=virtio,version=9p2000.L,ro,cache=loose,msize=262144,nofail 0 0\n"},
		// Loaded before local-fs.target, so the 9p mount above finds its
		// transport.
		{"/etc/modules-load.d/capstan.conf", 0o644, "9p\n9pnet_virtio\nbr_netfilter\noverlay\n"},
		{"/etc/default/locale", 0o644, "LANG=C.UTF-8\n"},
		{"/etc/hostname", 0o644, "localhost\n"},
		// Every VM gets its own machine ID on first boot.
		{"/etc/machine-id", 0o444, ""},
		// Only NoCloud: cloud-init does not probe for clouds that are not
		// there (each probe costs seconds under emulation). The image has
		// no locales package, so cloud-init must not try to generate its
		// default locale (the module fails and cloud-init reports an
		// error) whatever the user-data says.
		{"/etc/cloud/cloud.cfg.d/90-capstan.cfg", 0o644, "datasource_list: [ NoCloud, None ]\nlocale: C.UTF-8\n"},
		// What a Kubernetes node needs of the kernel.
		{"/etc/sysctl.d/90-capstan.conf", 0o644, "net.ipv4.ip_forward = 1\n" +
			"net.bridge.bridge-nf-call-iptables = 1\nnet.bridge.bridge-nf-call-ip6tables = 1\n"},
	}
}

// maskedUnits run periodic jobs a short-lived guest does not need, each
// costing seconds of emulated CPU.
var maskedUnits = []string{
	"apt-daily.timer", "apt-daily-upgrade.timer", "e2scrub_all.timer", "e2scrub_reap.service",
	"fstrim.timer", "man-db.timer", "systemd-networkd-wait-online.service",
}

// build makes the image in dir: kernel, initrd and qcow2 disk.
func build(ctx context.Context, dir, mirror string, progress func(string)) error {
	rootfs := filepath.Join(dir, "rootfs")
	if err := installPackages(ctx, rootfs, mirror, Packages, progress); err != nil {
		return err
	}
	if err := writeGuestFiles(rootfs, guestFiles()); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(rootfs, "opt/capstan"), 0o755); err != nil {
		return err
	}
	return finish(ctx, dir, rootfs, progress)
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
