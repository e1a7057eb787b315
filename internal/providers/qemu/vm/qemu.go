package vm

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

// Files of a VM's directory.
const (
	diskFile    = "disk.qcow2"  // the VM's overlay on the image's disk
	seedFile    = "seed.iso"    // NoCloud seed
	qmpSocket   = "qmp.sock"    // QMP
	consoleFile = "console.log" // the guest's serial console, appended to
	reportFile  = "report.log"  // the guest's second serial port, appended to
	qemuLog     = "qemu.log"    // QEMU's own stderr
	pidFile     = "qemu.pid"
	exitFile    = "exit" // how QEMU ended, written by the process that started it
	lockFile    = "lock"
)

// Defaults for a Spec that leaves sizes out.
const (
	DefaultCPUs      = 2
	DefaultMemoryMiB = 2048
	DefaultDiskGiB   = 20
)

// kernelCommandLine boots the image's root disk (the whole of vda, no
// partitions) with the console on the serial port, which goes to
// console.log; eth0 and eth1 are the NICs' names (guestNetworkConfig names them).
const kernelCommandLine = "root=/dev/vda rw console=ttyS0,115200 net.ifnames=0 biosdevname=0 panic=-1"

// translationCacheMiB sizes TCG's translated-code cache: QEMU's default
// (a quarter of the guest's memory, at least 1 GiB) makes each VM's
// resident memory about 1.5 GiB; 256 MiB keeps it near 600 MiB and is as
// fast for a guest like this one.
const translationCacheMiB = 256

// qemuArgs is QEMU's command line for spec, run in spec.Dir (so the socket
// path stays short). Software emulation: this provider must work where
// hardware virtualisation is not offered.
func qemuArgs(spec Spec) []string {
	args := []string{
		"-name", spec.Hostname,
		"-machine", "pc",
		"-accel", "tcg,thread=multi,tb-size=" + strconv.Itoa(translationCacheMiB),
		"-cpu", "max",
		"-smp", strconv.Itoa(spec.CPUs),
		"-m", strconv.Itoa(spec.MemoryMiB),
		"-nodefaults", "-no-user-config", "-display", "none",
		"-kernel", spec.Image.Kernel,
		"-initrd", spec.Image.Initrd,
		"-append", kernelCommandLine,
		"-drive", "file=" + filepath.Join(spec.Dir, diskFile) + ",if=virtio,format=qcow2,discard=unmap",
		"-drive", "file=" + seedFile + ",if=virtio,format=raw,readonly=on",
		"-netdev", "user,id=net0" + hostForwards(spec.Forwards),
		"-device", "virtio-net-pci,netdev=net0",
		"-device", "virtio-rng-pci",
		"-chardev", "file,id=console,path=" + consoleFile + ",append=on",
		"-serial", "chardev:console",
		"-chardev", "file,id=report,path=" + reportFile + ",append=on",
		"-serial", "chardev:report",
		"-qmp", "unix:" + qmpSocket + ",server=on,wait=off",
	}
	if seg := spec.Segment; seg != nil {
		args = append(args,
			"-netdev", "dgram,id=net1,local.type=unix,local.path="+seg.Socket+",remote.type=unix,remote.path="+seg.Switch,
			"-device", "virtio-net-pci,netdev=net1,mac="+seg.MAC)
	}
	return args
}

// hostForwards is the user-mode network's hostfwd options: each guest port
// on the host's loopback only.
func hostForwards(fs []Forward) string {
	var b strings.Builder
	for _, f := range fs {
		fmt.Fprintf(&b, ",hostfwd=tcp:127.0.0.1:%d-:%d", f.HostPort, f.GuestPort)
	}
	return b.String()
}
