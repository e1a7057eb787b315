package vm

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// maxSocketPath is the longest path a unix socket address holds
// (sockaddr_un's sun_path, less its terminating NUL).
const maxSocketPath = 107

// checkSegment refuses a Segment QEMU could not use or would misread.
func checkSegment(seg Segment) error {
	for field, path := range map[string]string{"Switch": seg.Switch, "Socket": seg.Socket} {
		switch {
		case path == "":
			return fmt.Errorf("vm: Spec.Segment.%s is empty: set the unix socket's path", field)
		case len(path) > maxSocketPath:
			return fmt.Errorf("vm: Spec.Segment.%s %q is %d bytes, longer than a unix socket path may be (%d): use a shorter directory", field, path, len(path), maxSocketPath)
		case strings.Contains(path, ","):
			return fmt.Errorf("vm: Spec.Segment.%s %q holds a comma, which QEMU's options cannot carry", field, path)
		}
	}
	if hw, err := net.ParseMAC(seg.MAC); err != nil || len(hw) != 6 || hw[0]&1 != 0 {
		return fmt.Errorf("vm: Spec.Segment.MAC %q is not a unicast Ethernet address such as 52:54:00:12:34:56", seg.MAC)
	}
	if p, err := netip.ParsePrefix(seg.Address); err != nil || !p.Addr().Is4() {
		return fmt.Errorf("vm: Spec.Segment.Address %q is not an IPv4 address with its prefix length, such as 172.31.0.5/24", seg.Address)
	}
	return nil
}
