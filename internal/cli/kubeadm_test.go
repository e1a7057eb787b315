package cli

import (
	"io"
	"strings"
	"testing"
)

// capstan kubeadm takes what bootstrap data passes to kubeadm, and refuses
// anything it would have to guess the meaning of.
func TestKubeadmCommandFlags(t *testing.T) {
	root := t.TempDir()
	run := func(args ...string) error {
		cmd := newRoot()
		cmd.SetArgs(append([]string{"kubeadm"}, args...))
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		return cmd.Execute()
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"kubeadm's harmless flags are accepted", []string{"init", "--root", root, "--config", "/run/kubeadm/kubeadm.yaml",
			"--v=5", "--ignore-preflight-errors=all", "--skip-phases", "addon/kube-proxy", "--upload-certs", "--skip-token-print"},
			"reading the kubeadm configuration"},
		{"join too", []string{"join", "--root", root, "--config", "/run/kubeadm/kubeadm-join-config.yaml", "--skip-phases=preflight"},
			"reading the kubeadm configuration"},
		{"an unknown flag is refused by name", []string{"join", "--root", root, "--config", "/x", "--discovery-token", "abcdef.0123456789abcdef"},
			"unknown flag: --discovery-token"},
		{"arguments are refused", []string{"init", "phase", "certs"}, `unknown command "phase"`},
		{"--config is required", []string{"init", "--root", root}, "--config is required"},
		{"test ports go together", []string{"init", "--root", root, "--config", "/x", "--apiserver-port", "7443"}, "go together"},
		{"other kubeadm commands are refused", []string{"reset"}, "kubeadm reset is not supported"},
		{"a bare kubeadm is refused", nil, "only kubeadm init and kubeadm join"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := run(tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("capstan kubeadm %s = %v, want an error containing %q", strings.Join(tc.args, " "), err, tc.want)
			}
		})
	}
}
