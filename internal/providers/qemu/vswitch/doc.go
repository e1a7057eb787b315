// Package vswitch is the Ethernet segment a QEMU cluster's VMs share: a
// learning switch in user space over unix datagram sockets. Each VM's
// second NIC is a QEMU `-netdev dgram` whose frames arrive here as
// datagrams from the VM's own socket; the switch remembers which socket
// each source MAC address came from and sends a frame to the one socket
// its destination was last seen on, or to every other known socket when
// the destination is unknown, broadcast or multicast. Nothing on the
// segment leaves the host, and it needs no privilege (no bridge, no tap
// device). The cluster's load balancer process (`capstan node lb`) runs the
// switch, so it lives and dies with the cluster's other host-side parts.
package vswitch
