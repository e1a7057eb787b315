package certs

import (
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
)

// FuzzKubeconfigCurrent hands fuzzed bytes, as the kubeconfig of an
// existing <cluster>-kubeconfig Secret, to the check that decides whether
// the control plane rewrites it. It never panics, and it calls a
// kubeconfig current only when that kubeconfig loads and its current
// context's cluster is the expected server with the cluster's CA.
func FuzzKubeconfigCurrent(f *testing.F) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ca, err := NewCA("kubernetes", ECDSAP256, now, 10*365*24*time.Hour)
	if err != nil {
		f.Fatal(err)
	}
	const server = "https://127.0.0.1:6443"
	good, err := adminKubeconfig(server, "c1", ca, ECDSAP256, now)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	other, err := NewCA("other", ECDSAP256, now, time.Hour)
	if err != nil {
		f.Fatal(err)
	}
	foreign, err := adminKubeconfig(server, "c1", other, ECDSAP256, now)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(foreign)
	for _, s := range []string{"", "{}", "current-context: x\ncontexts: [{name: x, context: {}}]\n", "clusters: 5"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !kubeconfigCurrent(data, server, ca, now) {
			return
		}
		cfg, err := clientcmd.Load(data)
		if err != nil {
			t.Fatalf("current, yet it does not load: %v", err)
		}
		ctx := cfg.Contexts[cfg.CurrentContext]
		if ctx == nil || cfg.Clusters[ctx.Cluster] == nil || cfg.Clusters[ctx.Cluster].Server != server {
			t.Fatal("current, yet its current context is not the server's")
		}
		if !kubeconfigCurrent(data, server, ca, now) {
			t.Fatal("current once and not twice")
		}
	})
}
