package vm

import (
	"fmt"
	"sort"
	"strings"
)

// HostAddress is the host as the guest sees it on QEMU's user-mode network:
// connections to it reach the host's loopback interface.
const HostAddress = "10.0.2.2"

// LoopbackForwards returns a cloud-config, for Spec.VendorData, that makes
// the guest's 127.0.0.1:PORT reach the host's 127.0.0.1:PORT for each port
// (LoopbackForwardScript), or an empty cloud-config when ports is empty.
func LoopbackForwards(ports []int) []byte {
	if len(ports) == 0 {
		return []byte("#cloud-config\n{}\n")
	}
	return BootScripts(LoopbackForwardScript(ports))
}

// LoopbackForwardScript is the shell script that makes the guest's
// 127.0.0.1:PORT reach the host's 127.0.0.1:PORT for each port. The
// workload cluster's control-plane endpoint is a load balancer on the
// host's loopback, and the same URL must work inside every guest.
//
// In the guest, connections it makes to 127.0.0.1 on these ports are
// rewritten (nftables DNAT in the output hook) to HostAddress, and their
// loopback source to the guest's own address (masquerade); the kernel lets
// a loopback-addressed packet leave by eth0 only with route_localnet set.
// A port the guest itself serves on 127.0.0.1 must not be among them: the
// guest could no longer reach its own service there.
func LoopbackForwardScript(ports []int) string {
	sorted := append([]int(nil), ports...)
	sort.Ints(sorted)
	var set []string
	for i, p := range sorted {
		if i > 0 && p == sorted[i-1] {
			continue
		}
		set = append(set, fmt.Sprint(p))
	}
	ruleset := strings.Join([]string{
		// Declaring then deleting makes the load idempotent: a second
		// run replaces the table instead of adding rules twice.
		"table ip capstan_loopback",
		"delete table ip capstan_loopback",
		"table ip capstan_loopback {",
		"  chain output {",
		"    type nat hook output priority -100; policy accept;",
		"    ip daddr 127.0.0.1 tcp dport { " + strings.Join(set, ", ") + " } dnat to " + HostAddress,
		"  }",
		"  chain postrouting {",
		"    type nat hook postrouting priority 100; policy accept;",
		"    ip saddr 127.0.0.0/8 ip daddr " + HostAddress + " masquerade",
		"  }",
		"}",
	}, "\n")
	return "# the guest's 127.0.0.1 on ports " + strings.Join(set, ", ") + " is the host's\n" +
		"sysctl -q -w net.ipv4.conf.all.route_localnet=1\n" +
		"nft -f - <<'CAPSTAN_NFT'\n" + ruleset + "\nCAPSTAN_NFT\n"
}

// BootScripts is a cloud-config, for Spec.VendorData, that runs each shell
// script as a bootcmd: early in every boot, before the user-data's runcmd.
func BootScripts(scripts ...string) []byte {
	var b strings.Builder
	b.WriteString("#cloud-config\n")
	b.WriteString("bootcmd:\n")
	for _, script := range scripts {
		b.WriteString("  - |\n")
		for _, line := range strings.Split(strings.TrimSuffix(script, "\n"), "\n") {
			b.WriteString("    " + line + "\n")
		}
	}
	return []byte(b.String())
}
