package workload_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"capstan.dev/capstan/internal/workload"
)

// listen runs serve on each connection a local listener accepts until the
// test ends, and returns the listener's address.
func listen(t *testing.T, serve func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			serve(c)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}

// A failed probe says what failed — refused, timed out, closed, TLS — and
// not what client-go's retries and rate limiter made of it.
func TestProbeNamesTheConnectionError(t *testing.T) {
	ctx := context.Background()
	ns := mgmt.Namespace(t)
	cc := startCache(t, workload.Options{ProbeTimeout: time.Second})

	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := closed.Addr().String()
	closed.Close()
	foreign := httptest.NewTLSServer(http.NotFoundHandler()) // a certificate the kubeconfig's CA did not sign
	t.Cleanup(foreign.Close)

	for _, tc := range []struct {
		name, addr, want string
	}{
		{"refused", refused, "connection refused"},
		{"silent", listen(t, func(net.Conn) {}), "timeout: no answer within 1s"},
		{"hangs-up", listen(t, func(c net.Conn) { c.Close() }), "connection closed by the server"},
		{"tls", strings.TrimPrefix(foreign.URL, "https://"), "TLS handshake failed"},
	} {
		key := client.ObjectKey{Namespace: ns, Name: tc.name}
		putKubeconfig(t, key, kubeconfigData(kubeconfig(t, wl, "https://"+tc.addr)))
		err := cc.Probe(ctx, key)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "rate limiter") {
			t.Errorf("%s: Probe = %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
}
