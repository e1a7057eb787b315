package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"capstan.dev/capstan/internal/scheme"
)

// FuzzKubeconfigFlag writes fuzzed bytes to the file --kubeconfig names
// and loads it the ways the commands do: the management cluster of
// describe, get, move, backup and the like (mgmtTarget), the target of init
// and upgrade (targetClient), and the manager's (managementConfig); each
// then builds its client, which dials nothing yet. A kubeconfig either
// gives a client or an error that names the flag or the file; never a
// panic.
func FuzzKubeconfigFlag(f *testing.F) {
	for _, s := range []string{
		"apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\nusers: [{name: u, user: {token: t}}]\ncontexts: [{name: c, context: {cluster: c, user: u, namespace: ns}}]\ncurrent-context: c\n",
		"apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://a', certificate-authority-data: eA==}}]\ncontexts: [{name: c, context: {cluster: c, user: nope}}]\ncurrent-context: c\n",
		"apiVersion: v1\nkind: Config\ncurrent-context: missing\n",
		"apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: '::'}}]\ncontexts: [{name: c, context: {cluster: c}}]\ncurrent-context: c\n",
		"apiVersion: v1\nkind: Config\nusers: [{name: u, user: {client-key-data: eA==, client-certificate: /nonexistent}}]\n",
		"", "{", "[]", "kind: Pod", "\x00\xff",
	} {
		f.Add([]byte(s))
	}
	path := filepath.Join(f.TempDir(), "kubeconfig")
	g := &globals{stateDir: f.TempDir()}
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := (&mgmtTarget{kubeconfig: path}).client(g); err != nil && !strings.Contains(err.Error(), "--kubeconfig "+path) {
			t.Fatalf("the management cluster's kubeconfig: the error names neither the flag nor the file: %v", err)
		}
		if _, _, err := targetClient(path); err != nil && !strings.Contains(err.Error(), path) {
			t.Fatalf("init's target: the error names no file: %v", err)
		}
		if cfg, err := managementConfig(path); err == nil {
			_, _ = client.New(cfg, client.Options{Scheme: scheme.New()})
		}
	})
}
