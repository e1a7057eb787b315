package agent

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-logr/logr"

	"capstan.dev/capstan/internal/node/cloudinit"
)

func TestRunnerRecognisesCommands(t *testing.T) {
	cases := []struct {
		name        string
		cmd         cloudinit.RunCommand
		unsupported string // substring of the reason; "" = runs
		calls       []string
		files       map[string]string
	}{
		{name: "upstream init with sentinel",
			cmd:   cloudinit.RunCommand{Shell: "kubeadm init --config /run/kubeadm/kubeadm.yaml  && echo success > /run/cluster-api/bootstrap-success.complete"},
			calls: []string{"init /run/kubeadm/kubeadm.yaml"},
			files: map[string]string{"/run/cluster-api/bootstrap-success.complete": "success\n"}},
		{name: "join with equals and ignored flags",
			cmd:   cloudinit.RunCommand{Shell: "kubeadm join --config=/run/kubeadm/kubeadm-join-config.yaml --v=5 --ignore-preflight-errors all"},
			calls: []string{"join /run/kubeadm/kubeadm-join-config.yaml"}},
		{name: "argv form",
			cmd:   cloudinit.RunCommand{Argv: []string{"kubeadm", "init", "--config", "/run/kubeadm/kubeadm.yaml", "--upload-certs"}},
			calls: []string{"init /run/kubeadm/kubeadm.yaml"}},
		{name: "argv operators are plain words",
			cmd:   cloudinit.RunCommand{Argv: []string{"echo", "a", ">", "b"}},
			files: map[string]string{}},
		{name: "harmless forms",
			cmd:   cloudinit.RunCommand{Shell: `mkdir -p /etc/x/y && touch /etc/x/t && echo "hello  world" >> /etc/x/y/f && echo -n 'again' >> /etc/x/y/f && true && :`},
			files: map[string]string{"/etc/x/t": "", "/etc/x/y/f": "hello  world\nagain"}},
		{name: "apt", cmd: cloudinit.RunCommand{Shell: "apt-get install -y jq"}, unsupported: "apt-get is not run"},
		{name: "nothing runs before an unsupported part",
			cmd: cloudinit.RunCommand{Shell: "mkdir -p /made && systemctl restart kubelet"}, unsupported: "systemctl"},
		{name: "pipe", cmd: cloudinit.RunCommand{Shell: "echo a | tee /x"}, unsupported: `shell syntax "|"`},
		{name: "variable", cmd: cloudinit.RunCommand{Shell: "echo $HOME > /x"}, unsupported: `shell syntax "$"`},
		{name: "semicolon", cmd: cloudinit.RunCommand{Shell: "true; true"}, unsupported: `";"`},
		{name: "background", cmd: cloudinit.RunCommand{Shell: "sleep 1 &"}, unsupported: "background"},
		{name: "kubeadm reset", cmd: cloudinit.RunCommand{Shell: "kubeadm reset -f"}, unsupported: "only kubeadm init and kubeadm join"},
		{name: "kubeadm without config", cmd: cloudinit.RunCommand{Shell: "kubeadm join 1.2.3.4:6443 --token x"}, unsupported: "reads everything from --config"},
		{name: "kubeadm unknown flag", cmd: cloudinit.RunCommand{Shell: "kubeadm init --config /k.yaml --dry-run"}, unsupported: "--dry-run"},
		{name: "escape from root", cmd: cloudinit.RunCommand{Shell: "echo x > /../../etc/passwd"}, unsupported: "contains .."},
		{name: "relative path", cmd: cloudinit.RunCommand{Shell: "touch notes"}, unsupported: "relative"},
		{name: "redirect elsewhere", cmd: cloudinit.RunCommand{Shell: "echo a > /x b"}, unsupported: "trailing > FILE"},
		{name: "quoted operator is text",
			cmd:   cloudinit.RunCommand{Shell: `echo '&&' ">" > /q`},
			files: map[string]string{"/q": "&& >\n"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			var calls []string
			rec := func(sub string) func(context.Context, string) error {
				return func(_ context.Context, p string) error {
					rel, err := filepath.Rel(root, p)
					if err != nil || strings.HasPrefix(rel, "..") {
						t.Errorf("kubeadm config %q not under the root", p)
					}
					calls = append(calls, sub+" /"+rel)
					return nil
				}
			}
			r := &Runner{Root: root, Init: rec("init"), Join: rec("join"), Log: logr.Discard()}
			err := r.Run(context.Background(), tc.cmd)
			if tc.unsupported != "" {
				if !errors.Is(err, cloudinit.ErrUnsupported) || !strings.Contains(err.Error(), tc.unsupported) {
					t.Fatalf("err = %v, want not supported with %q", err, tc.unsupported)
				}
				entries, _ := os.ReadDir(root)
				if len(entries) != 0 || len(calls) != 0 {
					t.Fatalf("an unsupported command ran partly: files %v calls %v", entries, calls)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(calls, ",") != strings.Join(tc.calls, ",") {
				t.Errorf("kubeadm calls = %v, want %v", calls, tc.calls)
			}
			for p, want := range tc.files {
				got, err := os.ReadFile(filepath.Join(root, p))
				if err != nil {
					t.Fatal(err)
				}
				if string(got) != want {
					t.Errorf("%s = %q, want %q", p, got, want)
				}
			}
		})
	}
}

func TestRunnerKubeadmFailureStopsTheChain(t *testing.T) {
	root := t.TempDir()
	boom := errors.New("boom")
	r := &Runner{Root: root, Init: func(context.Context, string) error { return boom }, Log: logr.Discard()}
	err := r.Run(context.Background(), cloudinit.RunCommand{Shell: "kubeadm init --config /k.yaml && echo success > /done"})
	if !errors.Is(err, boom) || errors.Is(err, cloudinit.ErrUnsupported) {
		t.Fatalf("err = %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "done")); !os.IsNotExist(err) {
		t.Errorf("the sentinel was written after kubeadm failed: %v", err)
	}
}
