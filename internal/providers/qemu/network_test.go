package qemu

import (
	"net/netip"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

func TestClusterNetworks(t *testing.T) {
	for _, c := range []struct {
		name           string
		pods, services []string
		want, wantErr  string
	}{
		{"defaults", nil, nil, "10.244.0.0/16", ""},
		{"the template's", []string{"10.244.0.0/16"}, []string{"10.96.0.0/12"}, "10.244.0.0/16", ""},
		{"wider pod range, masked", []string{"10.200.7.0/12"}, nil, "10.192.0.0/12", ""},
		{"pod range too narrow", []string{"10.244.0.0/17"}, nil, "", "pods.cidrBlocks[0] \"10.244.0.0/17\" must be an IPv4 range of /16 or wider"},
		{"IPv6 pods", []string{"fd00::/48"}, nil, "", "must be an IPv4 range"},
		{"not a block", []string{"10.244.0.0"}, nil, "", "pods.cidrBlocks[0] \"10.244.0.0\" is not a CIDR block"},
		{"pods over the segment", []string{"172.16.0.0/12"}, nil, "", "pods.cidrBlocks[0] 172.16.0.0/12 overlaps 172.31.0.0/24"},
		{"services over QEMU's network", []string{"10.244.0.0/16"}, []string{"10.0.0.0/8"}, "", "services.cidrBlocks[0] 10.0.0.0/8 overlaps 10.0.2.0/24"},
		{"second pod block checked", []string{"10.244.0.0/16", "172.31.0.0/16"}, nil, "", "pods.cidrBlocks[1]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := clusterNetworks(c.pods, c.services)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, c.wantErr)
				}
				return
			}
			if err != nil || got.String() != c.want {
				t.Fatalf("got %s, %v; want %s", got, err, c.want)
			}
		})
	}
}

func TestSegmentHosts(t *testing.T) {
	for addr, want := range map[string]int{"172.31.0.2": 2, "172.31.0.254": 254, "172.31.0.1": 0, "172.31.0.255": 0, "172.31.1.2": 0, "": 0, "x": 0} {
		if got := hostOf(addr); got != want {
			t.Errorf("hostOf(%q) = %d, want %d", addr, got, want)
		}
	}
	if got := segmentAddress(7); got != "172.31.0.7" || hostOf(got) != 7 {
		t.Errorf("segmentAddress(7) = %s", got)
	}
	if got := chooseHost(map[int]bool{0: true, 2: true, 3: true, 5: true}); got != 4 {
		t.Errorf("chooseHost = %d, want 4", got)
	}
	full := map[int]bool{}
	for n := firstHost; n <= lastHost; n++ {
		full[n] = true
	}
	if got := chooseHost(full); got != 0 {
		t.Errorf("chooseHost of a full segment = %d", got)
	}
	if got := nodePodSubnet(netip.MustParsePrefix("10.244.0.0/16"), 5).String(); got != "10.244.5.0/24" {
		t.Errorf("nodePodSubnet = %s", got)
	}
	if got := macOf(10); got != "52:54:00:1f:00:0a" {
		t.Errorf("macOf(10) = %s", got)
	}
}

func TestNodeNetworkScript(t *testing.T) {
	script := nodeNetworkScript(3, netip.MustParsePrefix("10.244.0.0/16"))
	for _, want := range []string{
		"ip route replace default via 172.31.0.1 dev eth1 onlink",
		"for m in $(seq 2 254); do",
		`[ "$m" = 3 ] || ip route replace 10.244.$m.0/24 via 172.31.0.$m dev eth1 onlink`,
		`ip saddr 10.244.0.0/16 oifname "eth0" masquerade`,
		`"subnet": "10.244.3.0/24"`,
		"/etc/cni/net.d/10-capstan.conflist",
	} {
		if !strings.Contains(script, want) {
			t.Errorf("script lacks %q:\n%s", want, script)
		}
	}
	vd := string(nodeVendorData(40123, 3, netip.MustParsePrefix("10.244.0.0/16")))
	if !strings.HasPrefix(vd, "#cloud-config\nbootcmd:\n  - |\n") || strings.Count(vd, "  - |\n") != 2 || !strings.Contains(vd, "tcp dport { 40123 } dnat to 10.0.2.2") {
		t.Errorf("vendor-data:\n%s", vd)
	}
}

func TestHostReservations(t *testing.T) {
	var h hostReservations
	a, b := client.ObjectKey{Namespace: "ns", Name: "a"}, client.ObjectKey{Namespace: "ns", Name: "b"}
	other := client.ObjectKey{Namespace: "other", Name: "a"}
	if n := h.reserve(a, map[int]bool{2: true}); n != 3 {
		t.Fatalf("a got %d, want 3", n)
	}
	// b's cache does not show a's choice yet: the reservation does.
	if n := h.reserve(b, map[int]bool{2: true}); n != 4 {
		t.Fatalf("b got %d, want 4", n)
	}
	if n := h.reserve(a, map[int]bool{2: true}); n != 3 {
		t.Fatalf("a asked again got %d, want its 3", n)
	}
	if n := h.reserve(other, nil); n != 2 {
		t.Fatalf("another namespace got %d, want 2", n)
	}
	h.release(a)
	if n := h.reserve(b, map[int]bool{2: true}); n != 4 {
		t.Fatalf("b after a's release got %d", n)
	}
	if n := h.reserve(client.ObjectKey{Namespace: "ns", Name: "c"}, map[int]bool{2: true}); n != 3 {
		t.Fatalf("c got %d, want a's released 3", n)
	}
}

func TestUserDataBootcmd(t *testing.T) {
	for data, want := range map[string]bool{
		"#cloud-config\nruncmd: [true]\n":                                      false,
		"#cloud-config\nbootcmd: [\"echo hi\"]\nruncmd: [true]\n":              true,
		"#cloud-config\nwrite_files:\n- path: /x\n  content: \"bootcmd: 1\"\n": false,
		"#!/bin/sh\nbootcmd=1\n":                                               false,
		"## template: jinja\n#cloud-config\nbootcmd: [x]\n":                    true,
		"## template: jinja\n#cloud-config\nruncmd: [x]\n":                     false,
	} {
		if got := userDataBootcmd([]byte(data)); got != want {
			t.Errorf("userDataBootcmd(%q) = %v, want %v", data, got, want)
		}
	}
}
