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
	seedKubeconfig(`server: "https://127.0.0.1:6443", insecure-skip-tls-verify: true`, `token: abc`),
	seedKubeconfig(`server: "https://127.0.0.1:6443", certificate-authority-data: bm90IGEgY2VydA==`, `client-certificate-data: bm90IGEgY2VydA==`),
	seedKubeconfig(`server: "https://127.0.0.1:6443", certificate-authority: /nonexistent/ca.crt`, `client-certificate: /nonexistent/a.crt, client-key: /nonexistent/a.key`),
	seedKubeconfig(`server: "ht tp://[::1", proxy-url: "::", tls-server-name: "x"`, `username: a, password: b, token: c`),
	"apiVersion: v1\nkind: Config\nclusters: [{name: c1, cluster: {server: https://a}}]\n",
	"apiVersion: v1\nkind: Config\ncurrent-context: nope\n",
	"",
	"{}",
	"- a\n- b\n",
	"apiVersion: v1\nkind: Pod\nmetadata: {name: x}\n",
	"clusters: 5\ncontexts: {a: b}\n",
}

// seedKubeconfig is a kubeconfig of one cluster, user and context, with the
// cluster's and the user's fields as given (YAML flow-map entries).
func seedKubeconfig(cluster, user string) string {
	return "apiVersion: v1\nkind: Config\n" +
		"clusters: [{name: c1, cluster: {" + cluster + "}}]\n" +
		"users: [{name: admin, user: {" + user + "}}]\n" +
		"contexts: [{name: c1, context: {cluster: c1, user: admin}}]\n" +
		"current-context: c1\n"
}
