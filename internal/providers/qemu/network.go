package qemu

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"capstan.dev/capstan/internal/providers/qemu/vm"
)

// The networks of a QEMU cluster's VMs. Each VM has two NICs: eth0 on
// QEMU's user-mode network (10.0.2.15, the same in every VM; it reaches
// the host, whose loopback serves the control-plane endpoint, and QEMU's
// DNS) and eth1 on the cluster's segment, a /24 its VMs share through the
// load balancer process's switch (package vswitch). A VM's address on the
// segment decides its share of the Pod network: host N of the segment owns
// the N-th /24 of the Pod CIDR, and every node routes each other node's
// /24 to that node's address, so Pods reach each other across nodes with
// nothing but static routes and the reference bridge CNI plugin.
var (
	segment     = netip.MustParsePrefix("172.31.0.0/24")
	userNetwork = netip.MustParsePrefix("10.0.2.0/24")
	// segmentGateway is the segment's default gateway in every guest. No
	// host has it: the default route only makes eth1 the interface
	// kubeadm and kubelet take the node's address from.
	segmentGateway = netip.MustParseAddr("172.31.0.1")
)

// Host numbers a VM may have on the segment: .1 is the gateway.
const (
	firstHost = 2
	lastHost  = 254
)

// defaultPodCIDR is used when the Cluster names no Pod range.
var defaultPodCIDR = netip.MustParsePrefix("10.244.0.0/16")

// clusterNetworks checks a Cluster's Pod and Service ranges for use with
// QEMU VMs and returns the Pod range the nodes' subnets come from.
func clusterNetworks(pods, services []string) (netip.Prefix, error) {
	podCIDR := defaultPodCIDR
	for i, block := range pods {
		p, err := netip.ParsePrefix(block)
		if err != nil {
			return podCIDR, fmt.Errorf("spec.clusterNetwork.pods.cidrBlocks[%d] %q is not a CIDR block", i, block)
		}
		if i == 0 {
			if !p.Addr().Is4() || p.Bits() > 16 {
				return podCIDR, fmt.Errorf("spec.clusterNetwork.pods.cidrBlocks[0] %q must be an IPv4 range of /16 or wider: each QEMU node gets a /24 of it by its address on the cluster's network", block)
			}
			podCIDR = p.Masked()
		}
	}
	for field, blocks := range map[string][]string{"pods": pods, "services": services} {
		for i, block := range blocks {
			p, err := netip.ParsePrefix(block)
			if err != nil {
				return podCIDR, fmt.Errorf("spec.clusterNetwork.%s.cidrBlocks[%d] %q is not a CIDR block", field, i, block)
			}
			for _, taken := range []netip.Prefix{segment, userNetwork} {
				if p.Overlaps(taken) {
					return podCIDR, fmt.Errorf("spec.clusterNetwork.%s.cidrBlocks[%d] %s overlaps %s, a network of the QEMU VMs themselves: choose a range outside %s and %s", field, i, block, taken, segment, userNetwork)
				}
			}
		}
	}
	return podCIDR, nil
}

// hostOf is the host number of a segment address ("172.31.0.5" → 5), 0
// when addr is not a usable address of the segment.
func hostOf(addr string) int {
	a, err := netip.ParseAddr(addr)
	if err != nil || !segment.Contains(a) {
		return 0
	}
	n := int(a.As4()[3])
	if n < firstHost || n > lastHost {
		return 0
	}
	return n
}

// segmentAddress is host n's address on the segment.
func segmentAddress(n int) string {
	b := segment.Addr().As4()
	b[3] = byte(n)
	return netip.AddrFrom4(b).String()
}

// chooseHost is the lowest host number not taken, 0 when none is left.
func chooseHost(taken map[int]bool) int {
	for n := firstHost; n <= lastHost; n++ {
		if !taken[n] {
			return n
		}
	}
	return 0
}

// nodePodSubnet is the /24 of podCIDR that host n's Pods get.
func nodePodSubnet(podCIDR netip.Prefix, n int) netip.Prefix {
	b := podCIDR.Masked().Addr().As4()
	b[2] += byte(n)
	return netip.PrefixFrom(netip.AddrFrom4(b), 24)
}

// macOf is host n's NIC address on the segment: locally administered
// (QEMU's 52:54:00 prefix) and unique on it.
func macOf(n int) string {
	return fmt.Sprintf("52:54:00:1f:00:%02x", n)
}

// nodeNetworkScript is the shell script, run early at every boot, that
// makes host n a node of the segment: the default route on eth1, routes to
// the other hosts' Pod subnets, Pods' traffic to QEMU's network (its DNS)
// masqueraded, and the CNI configuration for its own Pod subnet.
func nodeNetworkScript(n int, podCIDR netip.Prefix) string {
	own := nodePodSubnet(podCIDR, n)
	base := podCIDR.Masked().Addr().As4()
	cni := `{
  "cniVersion": "1.0.0",
  "name": "capstan",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {"type": "host-local", "ranges": [[{"subnet": "` + own.String() + `"}]], "routes": [{"dst": "0.0.0.0/0"}]}
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}`
	var b strings.Builder
	fmt.Fprintf(&b, "ip route del default dev eth0 2>/dev/null || true\n")
	fmt.Fprintf(&b, "ip route replace default via %s dev eth1 onlink\n", segmentGateway)
	fmt.Fprintf(&b, "for m in $(seq %d %d); do\n", firstHost, lastHost)
	fmt.Fprintf(&b, "  [ \"$m\" = %d ] || ip route replace %d.%d.$m.0/24 via %s.$m dev eth1 onlink\n", n, base[0], base[1], strings.TrimSuffix(segment.Addr().String(), ".0"))
	fmt.Fprintf(&b, "done\n")
	b.WriteString("nft -f - <<'CAPSTAN_NFT'\n")
	b.WriteString("table ip capstan_pods\ndelete table ip capstan_pods\ntable ip capstan_pods {\n")
	b.WriteString("  chain postrouting {\n    type nat hook postrouting priority 100; policy accept;\n")
	fmt.Fprintf(&b, "    ip saddr %s oifname \"eth0\" masquerade\n  }\n}\nCAPSTAN_NFT\n", podCIDR.Masked())
	b.WriteString("mkdir -p /etc/cni/net.d\n")
	b.WriteString("cat > /etc/cni/net.d/10-capstan.conflist <<'CAPSTAN_CNI'\n" + cni + "\nCAPSTAN_CNI\n")
	return b.String()
}

// nodeVendorData is the vendor-data of host n: the guest's 127.0.0.1 on
// the control-plane endpoint's port reaches the host's load balancer (the
// kubeconfigs name that address), and the node's network as above.
func nodeVendorData(endpointPort, n int, podCIDR netip.Prefix) []byte {
	return vm.BootScripts(
		vm.LoopbackForwardScript([]int{endpointPort}),
		nodeNetworkScript(n, podCIDR),
	)
}

// socketRoot is the directory every cluster's network sockets go under:
// short, since a unix socket's path holds at most 107 bytes, and the
// plane's state directory may be deep. It is the user's own, 0700.
func socketRoot() (string, error) {
	root := filepath.Join(os.TempDir(), "capstan-net-"+strconv.Itoa(os.Getuid()))
	if err := os.Mkdir(root, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return "", err
	}
	fi, err := os.Lstat(root)
	if err != nil {
		return "", err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok || int(st.Uid) != os.Getuid() {
		return "", fmt.Errorf("%s is not a directory of this user's: remove it", root)
	}
	if fi.Mode().Perm() != 0o700 {
		if err := os.Chmod(root, 0o700); err != nil {
			return "", err
		}
	}
	return root, nil
}

// networkDir is the directory of a cluster's network sockets, named by
// the cluster's load balancer directory (unique per plane and cluster).
func networkDir(root, lbDir string) string {
	sum := sha256.Sum256([]byte(lbDir))
	return filepath.Join(root, hex.EncodeToString(sum[:])[:16])
}

// switchSocket and vmSocket are the segment's sockets in a network
// directory: the switch's, and host n's.
func switchSocket(netDir string) string { return filepath.Join(netDir, "switch") }

func vmSocket(netDir string, n int) string {
	return filepath.Join(netDir, "vm-"+strconv.Itoa(n))
}

// removeVMSocket removes host n's socket from its cluster's network
// directory (QEMU leaves it behind).
func removeVMSocket(lbDir string, n int) error {
	root, err := socketRoot()
	if err != nil {
		return err
	}
	if err := os.Remove(vmSocket(networkDir(root, lbDir), n)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// hostReservations are the segment host numbers this process gave out, by
// namespace, until their machines are deleted.
type hostReservations struct {
	mu    sync.Mutex
	byKey map[client.ObjectKey]int
}

// reserve returns key's host number: the one it has, else the lowest not
// in taken nor reserved for another machine of its namespace; 0 when none
// is left.
func (h *hostReservations) reserve(key client.ObjectKey, taken map[int]bool) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.byKey == nil {
		h.byKey = map[client.ObjectKey]int{}
	}
	if n, ok := h.byKey[key]; ok && !taken[n] {
		return n
	}
	all := maps.Clone(taken)
	for k, n := range h.byKey {
		if k != key && k.Namespace == key.Namespace {
			all[n] = true
		}
	}
	n := chooseHost(all)
	if n != 0 {
		h.byKey[key] = n
	}
	return n
}

func (h *hostReservations) release(key client.ObjectKey) {
	h.mu.Lock()
	delete(h.byKey, key)
	h.mu.Unlock()
}

// userDataBootcmd tells whether a cloud-config sets bootcmd (a
// KubeadmConfig's bootCommands): cloud-init's merge would then drop the
// vendor-data's bootcmd, which sets up the node's network, and the node
// could never join. Data that is not a cloud-config (a script, MIME) is
// left alone.
func userDataBootcmd(data []byte) bool {
	// The kubeadm bootstrap's data is a jinja template of a cloud-config.
	if rest, ok := bytes.CutPrefix(data, []byte("## template: jinja\n")); ok {
		data = rest
	}
	if !bytes.HasPrefix(data, []byte("#cloud-config")) {
		return false
	}
	var top map[string]any
	if err := yaml.Unmarshal(data, &top); err != nil {
		return false
	}
	_, ok := top["bootcmd"]
	return ok
}
