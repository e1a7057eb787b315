package guest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"capstan.dev/capstan/internal/kubeadm"
)

// A stand-in systemctl records its arguments, one call a line, so the test
// sees exactly what Systemd.Start asks systemd.
func fakeSystemctl(t *testing.T, exitCode string) (prog, calls string) {
	t.Helper()
	dir := t.TempDir()
	calls = filepath.Join(dir, "calls")
	prog = filepath.Join(dir, "systemctl")
	script := "#!/bin/sh\necho \"$*\" >> " + calls + "\necho 'systemctl says no' >&2\nexit " + exitCode + "\n"
	if err := os.WriteFile(prog, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return prog, calls
}

func TestSystemdStartReloadsThenEnablesAndStarts(t *testing.T) {
	prog, calls := fakeSystemctl(t, "0")
	if err := (Systemd{Systemctl: prog}).Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(calls)
	if err != nil {
		t.Fatal(err)
	}
	if want := "daemon-reload\nenable --now capstan-node.service\n"; string(got) != want {
		t.Errorf("systemctl calls:\n%s\nwant:\n%s", got, want)
	}
}

func TestSystemdStartFailureNamesTheCallAndItsOutput(t *testing.T) {
	prog, calls := fakeSystemctl(t, "1")
	err := (Systemd{Systemctl: prog}).Start(context.Background())
	if err == nil || !strings.Contains(err.Error(), "systemctl daemon-reload") || !strings.Contains(err.Error(), "systemctl says no") {
		t.Fatalf("Start = %v", err)
	}
	if got, _ := os.ReadFile(calls); string(got) != "daemon-reload\n" {
		t.Errorf("calls after a failure: %q (nothing may follow the failed one)", got)
	}
}

func TestInstallUnit(t *testing.T) {
	root := t.TempDir()
	if err := InstallUnit(root); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "etc/systemd/system/capstan-node.service"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"ExecStart=/opt/capstan/capstan node serve --root /\n",
		"Restart=always\n",
		"WantedBy=multi-user.target\n",
		"After=network-online.target\n",
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("unit lacks %q:\n%s", want, b)
		}
	}
}

func TestDefaultPortsFollowBindPort(t *testing.T) {
	for _, tc := range []struct {
		name, config string
		api          int
	}{
		{"init default", "apiVersion: kubeadm.k8s.io/v1beta4\nkind: InitConfiguration\n", 6443},
		{"init bindPort", "apiVersion: kubeadm.k8s.io/v1beta4\nkind: InitConfiguration\nlocalAPIEndpoint:\n  bindPort: 7443\n", 7443},
		{"join control plane", "apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\ncontrolPlane:\n  localAPIEndpoint:\n    bindPort: 8443\ndiscovery:\n  bootstrapToken:\n    token: abcdef.0123456789abcdef\n    apiServerEndpoint: 127.0.0.1:1\n    unsafeSkipCAVerification: true\n", 8443},
	} {
		t.Run(tc.name, func(t *testing.T) {
			docs, err := kubeadm.Parse([]byte(tc.config))
			if err != nil {
				t.Fatal(err)
			}
			p := defaultPorts(docs)
			if p.APIServer != tc.api || p.EtcdClient != 2379 || p.EtcdPeer != 2380 {
				t.Errorf("ports %+v, want API server %d, etcd 2379/2380", *p, tc.api)
			}
		})
	}
}

func TestInRoot(t *testing.T) {
	if p, err := inRoot("/tmp/r", "/run/kubeadm/kubeadm.yaml"); err != nil || p != "/tmp/r/run/kubeadm/kubeadm.yaml" {
		t.Errorf("inRoot = %q, %v", p, err)
	}
	if _, err := inRoot("/tmp/r", "run/kubeadm.yaml"); err == nil {
		t.Error("a relative path under a test root was accepted")
	}
	if _, err := inRoot("/", "/run/../etc/shadow"); err == nil {
		t.Error("a path with .. was accepted")
	}
}
