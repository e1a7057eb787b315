package lb

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"

	"capstan.dev/capstan/internal/providers/local/machinedir"
	"capstan.dev/capstan/internal/providers/qemu/vswitch"
)

// Run serves the load balancer described by dir until ctx ends: it takes
// dir/lb.lock (failing if another load balancer holds it), listens on
// 127.0.0.1:<port> and proxies.
func Run(ctx context.Context, dir string, log logr.Logger) error {
	cfg, err := machinedir.ReadLBConfig(dir)
	if err != nil {
		return err
	}
	lock, err := machinedir.LockLB(dir)
	if err != nil {
		return err
	}
	defer lock.Release()
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(cfg.Port))))
	if err != nil {
		return fmt.Errorf("listening on the control-plane endpoint: %w", err)
	}
	log.Info("Load balancer listening", "address", ln.Addr().String(), "machinesDir", cfg.MachinesDir)
	b := New(cfg.MachinesDir, log)
	if cfg.CheckIntervalMillis > 0 {
		b.CheckInterval = time.Duration(cfg.CheckIntervalMillis) * time.Millisecond
	}
	if cfg.CheckTimeoutMillis > 0 {
		b.check.Timeout = time.Duration(cfg.CheckTimeoutMillis) * time.Millisecond
	}
	if cfg.SwitchSocket == "" {
		return b.Serve(ctx, ln)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	switchDone := make(chan error, 1)
	go func() { switchDone <- vswitch.Serve(ctx, cfg.SwitchSocket, log.WithName("switch")) }()
	err = b.Serve(ctx, ln)
	cancel()
	if serr := <-switchDone; err == nil {
		err = serr
	}
	return err
}

// Balancer proxies connections to the healthy backends found in a machines
// directory.
type Balancer struct {
	machinesDir string
	log         logr.Logger

	// ScanInterval is how often the endpoint files are re-read.
	ScanInterval time.Duration
	// CheckInterval is how often each backend's /readyz is checked.
	CheckInterval time.Duration
	// DialTimeout bounds connecting to a backend.
	DialTimeout time.Duration

	check *http.Client

	mu       sync.Mutex
	backends map[string]*backend // by host:port
	next     int
	conns    map[net.Conn]struct{}
}

type backend struct {
	healthy bool
	// failures counts the checks failed in a row.
	failures int
	stop     context.CancelFunc
}

// failuresToDown is how many checks in a row a healthy backend must fail
// to get no new connections: one slow answer from a loaded API server is
// not an outage.
const failuresToDown = 3

// nextHealth is a backend's health after a check: up at its first passed
// check, down after failuresToDown failed ones in a row.
func nextHealth(healthy bool, failures int, passed bool) (bool, int) {
	if passed {
		return true, 0
	}
	failures++
	if failures >= failuresToDown {
		return false, failures
	}
	return healthy, failures
}

// New returns a balancer over the endpoint files in machinesDir.
func New(machinesDir string, log logr.Logger) *Balancer {
	return &Balancer{
		machinesDir:   machinesDir,
		log:           log,
		ScanInterval:  250 * time.Millisecond,
		CheckInterval: 500 * time.Millisecond,
		DialTimeout:   2 * time.Second,
		check: &http.Client{
			Timeout: time.Second,
			Transport: &http.Transport{
				// The check is about liveness; the client verifies the
				// proxied connection end to end.
				TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // see above
				DisableKeepAlives: true,
			},
		},
		backends: map[string]*backend{},
		conns:    map[net.Conn]struct{}{},
	}
}

// Serve accepts connections on ln until ctx ends, then closes ln and every
// proxied connection.
func (b *Balancer) Serve(ctx context.Context, ln net.Listener) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		b.scanLoop(ctx)
	}()
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			cancel()
			wg.Wait()
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			b.proxy(ctx, conn)
		}()
	}
	b.mu.Lock()
	for c := range b.conns {
		c.Close()
	}
	b.mu.Unlock()
	wg.Wait()
	return nil
}

// Healthy returns the backends that get new connections, sorted.
func (b *Balancer) Healthy() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.healthyLocked()
}

func (b *Balancer) healthyLocked() []string {
	var out []string
	for addr, be := range b.backends {
		if be.healthy {
			out = append(out, addr)
		}
	}
	sort.Strings(out)
	return out
}

// pick returns the healthy backends in the order to try them: round-robin
// from the next one. With none healthy it tries every known backend: a
// lone API server too slow to pass its checks may still serve a client
// that waits, and refusing the client outright helps nobody.
func (b *Balancer) pick() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	healthy := b.healthyLocked()
	if len(healthy) == 0 {
		for addr := range b.backends {
			healthy = append(healthy, addr)
		}
		sort.Strings(healthy)
	}
	if len(healthy) == 0 {
		return nil
	}
	start := b.next % len(healthy)
	b.next++
	return append(healthy[start:len(healthy):len(healthy)], healthy[:start]...)
}

func (b *Balancer) track(c net.Conn, add bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if add {
		b.conns[c] = struct{}{}
	} else {
		delete(b.conns, c)
	}
}

func (b *Balancer) proxy(ctx context.Context, client net.Conn) {
	b.track(client, true)
	defer b.track(client, false)
	defer client.Close()
	var upstream net.Conn
	for _, addr := range b.pick() {
		d := net.Dialer{Timeout: b.DialTimeout}
		c, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			upstream = c
			break
		}
		b.log.V(1).Info("Backend refused a connection", "backend", addr, "err", err.Error())
	}
	if upstream == nil {
		// No healthy backend: the client sees the connection closed.
		return
	}
	b.track(upstream, true)
	defer b.track(upstream, false)
	defer upstream.Close()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		// Pass the half-close on so the other direction can finish.
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		} else {
			dst.Close()
		}
		done <- struct{}{}
	}
	go pipe(upstream, client)
	go pipe(client, upstream)
	<-done
	<-done
}

// scanLoop re-reads the endpoint files until ctx ends, starting a health
// checker for each new backend and stopping those whose file is gone.
func (b *Balancer) scanLoop(ctx context.Context) {
	t := time.NewTicker(b.ScanInterval)
	defer t.Stop()
	for {
		b.scan(ctx)
		select {
		case <-ctx.Done():
			b.mu.Lock()
			for _, be := range b.backends {
				be.stop()
			}
			b.mu.Unlock()
			return
		case <-t.C:
		}
	}
}

func (b *Balancer) scan(ctx context.Context) {
	files, _ := filepath.Glob(filepath.Join(b.machinesDir, "*", machinedir.APIServerEndpointFile))
	found := map[string]bool{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		addr := strings.TrimSpace(string(raw))
		if _, _, err := net.SplitHostPort(addr); err != nil {
			continue
		}
		found[addr] = true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for addr, be := range b.backends {
		if !found[addr] {
			be.stop()
			delete(b.backends, addr)
			b.log.Info("Backend removed", "backend", addr)
		}
	}
	for addr := range found {
		if _, ok := b.backends[addr]; ok {
			continue
		}
		cctx, stop := context.WithCancel(ctx)
		be := &backend{stop: stop}
		b.backends[addr] = be
		b.log.Info("Backend added", "backend", addr)
		go b.checkLoop(cctx, addr, be)
	}
}

func (b *Balancer) checkLoop(ctx context.Context, addr string, be *backend) {
	t := time.NewTicker(b.CheckInterval)
	defer t.Stop()
	for {
		ok := b.probe(ctx, addr)
		b.mu.Lock()
		if ctx.Err() != nil {
			b.mu.Unlock()
			return
		}
		healthy, failures := nextHealth(be.healthy, be.failures, ok)
		if healthy != be.healthy {
			b.log.Info("Backend health changed", "backend", addr, "healthy", healthy)
		}
		be.healthy, be.failures = healthy, failures
		b.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (b *Balancer) probe(ctx context.Context, addr string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+"/readyz", nil)
	if err != nil {
		return false
	}
	resp, err := b.check.Do(req)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
