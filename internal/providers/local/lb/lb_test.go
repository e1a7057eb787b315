package lb

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"capstan.dev/capstan/internal/atomicfile"
	"capstan.dev/capstan/internal/providers/local/machinedir"
	"capstan.dev/capstan/test/fixture"
)

// fakeAPIServer is an HTTPS server that answers /readyz (200 while ready)
// and /who with its name.
type fakeAPIServer struct {
	name  string
	ready atomic.Bool
	srv   *httptest.Server
}

func newFakeAPIServer(t *testing.T, name string) *fakeAPIServer {
	f := &fakeAPIServer{name: name}
	f.ready.Store(true)
	f.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/readyz":
			if !f.ready.Load() {
				http.Error(w, "not ready", http.StatusInternalServerError)
				return
			}
			fmt.Fprint(w, "ok")
		default:
			fmt.Fprint(w, f.name)
		}
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeAPIServer) addr() string { return strings.TrimPrefix(f.srv.URL, "https://") }

// machines is a machines directory with helpers to publish endpoints.
type machines string

func (m machines) publish(t *testing.T, machine, addr string) {
	t.Helper()
	if err := atomicfile.WriteFile(filepath.Join(string(m), machine, machinedir.APIServerEndpointFile), []byte(addr+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (m machines) withdraw(t *testing.T, machine string) {
	t.Helper()
	if err := os.Remove(filepath.Join(string(m), machine, machinedir.APIServerEndpointFile)); err != nil {
		t.Fatal(err)
	}
}

// startLB runs the load balancer the way `capstan node lb` does, from a
// directory with lb.json, on a free port.
func startLB(t *testing.T) (machines, string) {
	t.Helper()
	root := t.TempDir()
	m := machines(filepath.Join(root, "machines"))
	lbDir := filepath.Join(root, "lb")
	if err := os.MkdirAll(lbDir, 0o755); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	if err := machinedir.WriteLBConfig(lbDir, machinedir.LBConfig{Port: int32(port), MachinesDir: string(m)}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, lbDir, logr.Discard()) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("load balancer: %v", err)
		}
	})
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	fixture.Eventually(t, "load balancer listening", 10*time.Second, func(context.Context) string {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return fixture.Unless(err == nil, "")
	})
	return m, addr
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// client makes one TLS connection per request, as the balancer spreads
// connections, not requests.
func client(keepAlive bool) *http.Client {
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true},
		DisableKeepAlives: !keepAlive,
	}}
}

func who(c *http.Client, lbAddr string) (string, error) {
	resp, err := c.Get("https://" + lbAddr + "/who")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// spread sends n requests and counts the answers by backend name.
func spread(t *testing.T, lbAddr string, n int) map[string]int {
	t.Helper()
	c := client(false)
	seen := map[string]int{}
	for range n {
		name, err := who(c, lbAddr)
		if err != nil {
			t.Fatalf("request through the load balancer: %v", err)
		}
		seen[name]++
	}
	return seen
}

// spreadLoose is spread for waiting: failures count as nobody.
func spreadLoose(lbAddr string, n int) map[string]int {
	c := client(false)
	seen := map[string]int{}
	for range n {
		name, _ := who(c, lbAddr)
		seen[name]++
	}
	return seen
}

func TestNoBackendRefuses(t *testing.T) {
	_, addr := startLB(t)
	if _, err := who(client(false), addr); err == nil {
		t.Fatal("a request with no backend succeeded")
	}
}

func TestRoundRobinOverHealthyBackends(t *testing.T) {
	m, addr := startLB(t)
	a, b := newFakeAPIServer(t, "a"), newFakeAPIServer(t, "b")
	m.publish(t, "m-a", a.addr())
	m.publish(t, "m-b", b.addr())
	fixture.Eventually(t, "two healthy backends", 10*time.Second, func(context.Context) string {
		_, err := who(client(false), addr)
		return fixture.Unless(err == nil, "")
	})
	fixture.Eventually(t, "both backends answering", 10*time.Second, func(context.Context) string {
		s := spreadLoose(addr, 4)
		return fixture.Unless(s["a"] > 0 && s["b"] > 0, "")
	})
	seen := spread(t, addr, 10)
	if seen["a"] != 5 || seen["b"] != 5 {
		t.Fatalf("want 5 requests on each backend, got %v", seen)
	}

	// An unhealthy backend gets nothing until it is ready again.
	b.ready.Store(false)
	fixture.Eventually(t, "b marked unhealthy", 10*time.Second, func(context.Context) string {
		s := spreadLoose(addr, 2)
		return fixture.Unless(s["b"] == 0 && s["a"] == 2, "")
	})
	if seen := spread(t, addr, 10); seen["b"] != 0 || seen["a"] != 10 {
		t.Fatalf("unhealthy backend b got connections: %v", seen)
	}
	b.ready.Store(true)
	fixture.Eventually(t, "b healthy again", 10*time.Second, func(context.Context) string { return fixture.Unless(spreadLoose(addr, 2)["b"] > 0, "") })
}

func TestGracefulRemoval(t *testing.T) {
	m, addr := startLB(t)
	a, b := newFakeAPIServer(t, "a"), newFakeAPIServer(t, "b")
	m.publish(t, "m-a", a.addr())
	m.publish(t, "m-b", b.addr())
	fixture.Eventually(t, "both backends answering", 10*time.Second, func(context.Context) string {
		s := spreadLoose(addr, 4)
		return fixture.Unless(s["a"] > 0 && s["b"] > 0, "")
	})

	// A kept-alive connection that landed on b.
	var onB *http.Client
	for range 10 {
		c := client(true)
		if name, err := who(c, addr); err == nil && name == "b" {
			onB = c
			break
		}
	}
	if onB == nil {
		t.Fatal("no connection landed on b")
	}

	// A client looping while b leaves must see no failure.
	stop := make(chan struct{})
	failures := make(chan error, 1000)
	loopDone := make(chan int)
	go func() {
		c := client(false)
		n := 0
		for {
			select {
			case <-stop:
				loopDone <- n
				return
			default:
			}
			if _, err := who(c, addr); err != nil {
				failures <- err
			}
			n++
		}
	}()
	time.Sleep(300 * time.Millisecond)
	m.withdraw(t, "m-b")
	// As the node does: wait for the balancer to stop sending, then go.
	time.Sleep(2 * time.Second)
	n := 0
	for range 20 {
		if name, err := who(client(false), addr); err != nil || name != "a" {
			t.Errorf("after b left: got %q, %v; want a", name, err)
		}
	}
	// The connection opened before b left still works.
	if name, err := who(onB, addr); err != nil || name != "b" {
		t.Errorf("existing connection to b after it left: %q, %v", name, err)
	}
	close(stop)
	n = <-loopDone
	close(failures)
	for err := range failures {
		t.Errorf("request failed while b left gracefully: %v", err)
	}
	if n < 10 {
		t.Errorf("the client loop made only %d requests", n)
	}
}

func TestBackendFilesAppearAndDisappear(t *testing.T) {
	m, addr := startLB(t)
	a := newFakeAPIServer(t, "a")
	m.publish(t, "m-a", a.addr())
	fixture.Eventually(t, "a answering", 10*time.Second, func(context.Context) string {
		name, err := who(client(false), addr)
		return fixture.Unless(err == nil && name == "a", "")
	})
	m.withdraw(t, "m-a")
	fixture.Eventually(t, "no backend left", 10*time.Second, func(context.Context) string {
		_, err := who(client(false), addr)
		return fixture.Unless(err != nil, "")
	})
	// A file with garbage is ignored rather than fatal.
	m.publish(t, "m-x", "not an address")
	b := newFakeAPIServer(t, "b")
	m.publish(t, "m-b", b.addr())
	fixture.Eventually(t, "b answering", 10*time.Second, func(context.Context) string {
		name, err := who(client(false), addr)
		return fixture.Unless(err == nil && name == "b", "")
	})
}

func TestRunRefusesSecondInstance(t *testing.T) {
	root := t.TempDir()
	if err := machinedir.WriteLBConfig(root, machinedir.LBConfig{Port: int32(freePort(t)), MachinesDir: filepath.Join(root, "machines")}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, root, logr.Discard()) }()
	fixture.Eventually(t, "first instance holds the lock", 10*time.Second, func(context.Context) string {
		_, err := os.Stat(filepath.Join(root, machinedir.LBLockFile))
		return fixture.Unless(err == nil, "")
	})
	time.Sleep(100 * time.Millisecond)
	if err := Run(context.Background(), root, logr.Discard()); err == nil || !strings.Contains(err.Error(), "held") {
		t.Fatalf("second instance: want a lock error, got %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestNextHealth(t *testing.T) {
	for _, c := range []struct {
		healthy      bool
		failures     int
		passed       bool
		wantHealthy  bool
		wantFailures int
	}{
		{false, 0, true, true, 0},  // up at the first passed check
		{true, 2, true, true, 0},   // a pass clears the count
		{true, 0, false, true, 1},  // one slow answer is not an outage
		{true, 1, false, true, 2},  // nor two
		{true, 2, false, false, 3}, // the third in a row is
		{false, 5, false, false, 6},
	} {
		h, f := nextHealth(c.healthy, c.failures, c.passed)
		if h != c.wantHealthy || f != c.wantFailures {
			t.Errorf("nextHealth(%v, %d, %v) = %v, %d; want %v, %d", c.healthy, c.failures, c.passed, h, f, c.wantHealthy, c.wantFailures)
		}
	}
}

// TestNoHealthyBackendTriesTheKnownOnes: a lone backend failing its checks
// (a starved API server answering /readyz late) still gets the clients
// that come, rather than their connections closed unanswered.
func TestNoHealthyBackendTriesTheKnownOnes(t *testing.T) {
	m, addr := startLB(t)
	a := newFakeAPIServer(t, "a")
	a.ready.Store(false)
	m.publish(t, "m-a", a.addr())
	fixture.Eventually(t, "the unready backend answers through the balancer", 10*time.Second, func(context.Context) string {
		got, err := who(client(false), addr)
		if err != nil {
			return err.Error()
		}
		return fixture.Unless(got == "a", "answered by "+got)
	})
}
