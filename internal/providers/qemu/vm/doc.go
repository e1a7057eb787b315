// Package vm runs one QEMU virtual machine per directory: a qcow2 overlay on
// a shared base image, a NoCloud seed carrying the machine's cloud-init data,
// user-mode networking with loopback port forwards, optionally a second NIC
// on an Ethernet segment shared with other VMs (Spec.Segment), a second
// serial port for the
// guest's reports, and a QMP socket through which it is inspected and
// stopped. The QEMU process is detached so it outlives its caller; a later
// caller finds it again by its directory.
//
// A VM's directory (mode 0700, files 0600):
//
//	disk.qcow2   the VM's disk, an overlay on the image's disk
//	seed.iso     the NoCloud seed (meta-data, user-data, vendor-data, network-config)
//	qmp.sock     QEMU's QMP socket
//	console.log  the guest's serial console, appended to at each start
//	report.log   the guest's second serial port (ttyS1), appended to
//	qemu.log     QEMU's own output
//	qemu.pid     QEMU's pid
//	exit         how QEMU ended, when the process that started it saw it end
//	lock         held while a VM starts
//
// docs/qemu-guest.md describes the guest and its network.
package vm
