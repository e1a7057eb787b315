package vm

import (
	"strings"
	"testing"

	"capstan.dev/capstan/internal/providers/qemu/image"
)

func TestQEMUArgs(t *testing.T) {
	spec, err := complete(Spec{
		Dir:      "/var/vms/cp-0",
		Image:    image.Image{Kernel: "/c/vmlinuz", Initrd: "/c/initrd.img", Disk: "/c/disk.qcow2"},
		Hostname: "cp-0", InstanceID: "i",
		Forwards: []Forward{{HostPort: 40022, GuestPort: 22}, {HostPort: 40443, GuestPort: 6443}},
	})
	if err != nil {
		t.Fatal(err)
	}
	args := qemuArgs(spec)
	opt := map[string][]string{}
	for i := 0; i+1 < len(args); i++ {
		if strings.HasPrefix(args[i], "-") && !strings.HasPrefix(args[i+1], "-") {
			opt[args[i]] = append(opt[args[i]], args[i+1])
			i++
		}
	}
	for flag, want := range map[string]string{
		"-accel":  "tcg,thread=multi,tb-size=256",
		"-smp":    "2",
		"-m":      "2048",
		"-kernel": "/c/vmlinuz",
		"-initrd": "/c/initrd.img",
		"-qmp":    "unix:qmp.sock,server=on,wait=off",
		"-netdev": "user,id=net0,hostfwd=tcp:127.0.0.1:40022-:22,hostfwd=tcp:127.0.0.1:40443-:6443",
		"-virtfs": "",
		"-serial": "chardev:console chardev:report",
	} {
		if got := strings.Join(opt[flag], " "); got != want {
			t.Errorf("%s %q, want %q", flag, got, want)
		}
	}
	drives := strings.Join(opt["-drive"], " ")
	for _, want := range []string{"file=/var/vms/cp-0/disk.qcow2,if=virtio,format=qcow2", "file=seed.iso,if=virtio,format=raw,readonly=on"} {
		if !strings.Contains(drives, want) {
			t.Errorf("drives %q lack %q", drives, want)
		}
	}
	if got := strings.Join(opt["-append"], ""); !strings.Contains(got, "root=/dev/vda") || !strings.Contains(got, "console=ttyS0") {
		t.Errorf("kernel command line %q", got)
	}
	if len(opt["-netdev"]) != 1 {
		t.Errorf("a VM off any segment has netdevs %q", opt["-netdev"])
	}

	spec.Segment = &Segment{Switch: "/run/s/switch", Socket: "/run/s/cp-0", MAC: "52:54:00:00:00:02", Address: "172.31.0.2/24"}
	joined := strings.Join(qemuArgs(spec), " ")
	for _, want := range []string{
		"-netdev dgram,id=net1,local.type=unix,local.path=/run/s/cp-0,remote.type=unix,remote.path=/run/s/switch",
		"-device virtio-net-pci,netdev=net1,mac=52:54:00:00:00:02",
	} {
		if !strings.Contains(joined, want) {
			t.Errorf("QEMU's arguments on a segment lack %q: %s", want, joined)
		}
	}
}

func TestCompleteRefuses(t *testing.T) {
	good := Spec{Dir: "/v/a", Image: image.Image{Kernel: "k", Initrd: "i", Disk: "d"}, Hostname: "a", InstanceID: "i"}
	for name, c := range map[string]struct {
		change func(*Spec)
		want   string
	}{
		"no dir":         {func(s *Spec) { s.Dir = "" }, "Spec.Dir"},
		"comma in dir":   {func(s *Spec) { s.Dir = "/v/a,b" }, "comma"},
		"no kernel":      {func(s *Spec) { s.Image.Kernel = "" }, "Spec.Image.Kernel"},
		"bad hostname":   {func(s *Spec) { s.Hostname = "a,b" }, "Spec.Hostname"},
		"no instance id": {func(s *Spec) { s.InstanceID = "" }, "Spec.InstanceID"},
		"bad port":       {func(s *Spec) { s.Forwards = []Forward{{HostPort: 0, GuestPort: 22}} }, "Spec.Forwards"},
		"negative cpus":  {func(s *Spec) { s.CPUs = -1 }, "Spec.CPUs"},
		"segment without a switch": {func(s *Spec) {
			s.Segment = &Segment{Socket: "/s/a", MAC: "52:54:00:00:00:02", Address: "172.31.0.2/24"}
		}, "Spec.Segment.Switch"},
		"segment socket too long": {func(s *Spec) {
			s.Segment = &Segment{Switch: "/s/switch", Socket: "/" + strings.Repeat("s", 107), MAC: "52:54:00:00:00:02", Address: "172.31.0.2/24"}
		}, "Spec.Segment.Socket"},
		"multicast MAC": {func(s *Spec) {
			s.Segment = &Segment{Switch: "/s/switch", Socket: "/s/a", MAC: "01:00:5e:00:00:01", Address: "172.31.0.2/24"}
		}, "Spec.Segment.MAC"},
		"address without prefix": {func(s *Spec) {
			s.Segment = &Segment{Switch: "/s/switch", Socket: "/s/a", MAC: "52:54:00:00:00:02", Address: "172.31.0.2"}
		}, "Spec.Segment.Address"},
	} {
		t.Run(name, func(t *testing.T) {
			s := good
			c.change(&s)
			_, err := complete(s)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one naming %q", err, c.want)
			}
		})
	}
	if _, err := complete(good); err != nil {
		t.Fatalf("a good spec: %v", err)
	}
}

func TestLoopbackForwards(t *testing.T) {
	got := string(LoopbackForwards([]int{6443, 30000, 6443}))
	for _, want := range []string{
		"#cloud-config\n", "bootcmd:\n", "route_localnet=1",
		"ip daddr 127.0.0.1 tcp dport { 6443, 30000 } dnat to 10.0.2.2",
		"ip saddr 127.0.0.0/8 ip daddr 10.0.2.2 masquerade",
		"delete table ip capstan_loopback",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("vendor-data lacks %q:\n%s", want, got)
		}
	}
	if got := string(LoopbackForwards(nil)); strings.Contains(got, "bootcmd") {
		t.Errorf("no ports, yet:\n%s", got)
	}
}
