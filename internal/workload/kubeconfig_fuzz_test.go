package workload

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// FuzzKubeconfigSecret hands fuzzed bytes, as the value of a cluster's
// kubeconfig Secret, to the code that connects to a workload cluster:
// parsing, the transport (certificates, keys, CA bundle, proxy) and the
// clients built before the first request. The context is cancelled, so
// nothing is dialled: the result is an error that names the Secret and its
// key, or, for a kubeconfig that builds, the cancellation. Never a panic.
func FuzzKubeconfigSecret(f *testing.F) {
	for _, s := range kubeconfigSeeds {
		f.Add([]byte(s))
	}
	opts, err := Options{}.withDefaults()
	if err != nil {
		f.Fatal(err)
	}
	key := client.ObjectKey{Namespace: "ns", Name: "c1"}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	f.Fuzz(func(t *testing.T, data []byte) {
		a, err := newAccessor(ctx, ctx, key, data, "1", opts, logr.Discard())
		if err == nil {
			a.stop()
			t.Fatal("connected with a cancelled context")
		}
		if errors.Is(err, context.Canceled) {
			return
		}
		var nc *NotConnectedError
		if !errors.As(err, &nc) || nc.Reason != ReasonKubeconfigInvalid {
			t.Fatalf("a kubeconfig that does not build gives %T %v, not a %s error", err, err, ReasonKubeconfigInvalid)
		}
		if msg := err.Error(); !strings.Contains(msg, "ns/c1-kubeconfig") || !strings.Contains(msg, `"value"`) {
			t.Fatalf("the error names neither the Secret nor its key: %v", err)
		}
	})
}

// kubeconfigSeeds are kubeconfigs good and bad in the ways a Secret's can
// be: the shape clientcmd writes, a CA that is not PEM, a client
// certificate without its key, files named instead of data, a server that
// is no URL, no current context, and YAML that is not a kubeconfig.
var kubeconfigSeeds = []string{
	`apiVersion: v1
kind: Config
clusters:
- name: c1
  cluster: {server: "https://127.0.0.1:6443", insecure-skip-tls-verify: true}
users:
- name: admin
  user: {token: abc}
contexts:
- name: c1
  context: {cluster: c1, user: admin}
current-context: c1
`,
	`apiVersion: v1
kind: Config
clusters:
- name: c1
  cluster: {server: "https://127.0.0.1:6443", certificate-authority-data: bm90IGEgY2VydA==}
users:
- name: admin
  user: {client-certificate-data: bm90IGEgY2VydA==}
contexts:
- name: c1
  context: {cluster: c1, user: admin}
current-context: c1
`,
	`apiVersion: v1
kind: Config
clusters:
- name: c1
  cluster: {server: "https://127.0.0.1:6443", certificate-authority: /nonexistent/ca.crt}
users:
- name: admin
  user: {client-certificate: /nonexistent/a.crt, client-key: /nonexistent/a.key}
contexts:
- name: c1
  context: {cluster: c1, user: admin}
current-context: c1
`,
	`apiVersion: v1
kind: Config
clusters:
- name: c1
  cluster: {server: "ht tp://[::1", proxy-url: "::", tls-server-name: "x"}
contexts:
- name: c1
  context: {cluster: c1}
current-context: c1
`,
	"apiVersion: v1\nkind: Config\nclusters: [{name: c1, cluster: {server: https://a}}]\n",
	"apiVersion: v1\nkind: Config\ncurrent-context: nope\n",
	"",
	"{}",
	"- a\n- b\n",
	"apiVersion: v1\nkind: Pod\nmetadata: {name: x}\n",
	"clusters: 5\ncontexts: {a: b}\n",
}
