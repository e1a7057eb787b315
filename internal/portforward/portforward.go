// Package portforward opens connections to a port of a Pod through the
// pods/portforward subresource of the cluster's API server, the way
// `kubectl port-forward` reaches a Pod, but handing each connection to the
// caller as a net.Conn instead of listening on a local port.
//
// This is how the management cluster reaches what runs on a workload
// cluster's machines (etcd above all): through the cluster's API endpoint
// only, never through a node address, which on a real cloud the management
// cluster usually cannot route to.
//
// # Transport
//
// The connection is upgraded to SPDY/3.1 with the portforward.k8s.io
// subprotocol, and each Dial opens its own upgraded HTTP connection
// carrying one pair of streams (error and data) for one port. SPDY is what
// every API server serves for port-forward: a real kube-apiserver (which
// also accepts the newer websocket tunnelling since v1.31, and speaks SPDY
// to the kubelet either way) and the simulated API servers of Cluster
// API's in-memory provider and Capstan's own, which serve SPDY only. Trying
// websockets first would cost those a failed upgrade on every connection.
//
// One connection per Dial keeps a stream's failure, or its caller's Close,
// from disturbing any other connection.
package portforward

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	spdystream "k8s.io/apimachinery/pkg/util/httpstream/spdy"
	"k8s.io/client-go/rest"
)

// Protocol is the port-forward subprotocol negotiated with the API server.
const Protocol = "portforward.k8s.io"

// pingPeriod keeps idle connections alive through load balancers that
// close quiet ones, as client-go's own port-forward does.
const pingPeriod = 5 * time.Second

// upgradeTimeout bounds the upgrade when the caller's context has no
// deadline: an API server that accepts the connection but never answers
// must not hold a caller for ever.
const upgradeTimeout = 30 * time.Second

// Dialer opens connections to ports of Pods through one API server.
type Dialer struct {
	cfg  *rest.Config
	base *url.URL
	tls  *tls.Config
}

// NewDialer prepares a Dialer for the API server cfg names, with cfg's
// credentials. cfg is copied.
func NewDialer(cfg *rest.Config) (*Dialer, error) {
	cfg = rest.CopyConfig(cfg)
	base, _, err := rest.DefaultServerUrlFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("port-forward: API server address %q: %w", cfg.Host, err)
	}
	// Computed once: it parses the certificates, and every connection of
	// this Dialer uses the same.
	tlsConfig, err := rest.TLSConfigFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("port-forward: TLS configuration for %s: %w", cfg.Host, err)
	}
	return &Dialer{cfg: cfg, base: base, tls: tlsConfig}, nil
}

// url is the port-forward subresource of Pod namespace/pod.
func (d *Dialer) url(namespace, pod string) *url.URL {
	u := *d.base
	u.Path = path.Join("/", u.Path, "api", "v1", "namespaces", namespace, "pods", pod, "portforward")
	return &u
}

// Dial connects to port of Pod namespace/pod. ctx bounds the dial only:
// once Dial returned, the connection lives until it is closed or breaks.
// The error of a failed dial names the Pod and the port and wraps the API
// server's answer (a *errors.StatusError when it refused the upgrade, for
// example because the Pod does not exist).
func (d *Dialer) Dial(ctx context.Context, namespace, pod string, port int) (net.Conn, error) {
	target := fmt.Sprintf("%s/%s port %d", namespace, pod, port)
	conn, err := d.dial(ctx, namespace, pod, port, target)
	if err != nil {
		return nil, fmt.Errorf("cannot port-forward to %s: %w", target, err)
	}
	return conn, nil
}

// ContextDialer is Dial for clients that dial an address, such as a gRPC
// client's dialer: addr is "<pod>:<port>" and names a Pod in namespace.
func (d *Dialer) ContextDialer(namespace string) func(ctx context.Context, addr string) (net.Conn, error) {
	return func(ctx context.Context, addr string) (net.Conn, error) {
		pod, portText, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, fmt.Errorf("port-forward: address %q is not <pod>:<port>: %w", addr, err)
		}
		port, err := strconv.Atoi(portText)
		if err != nil || port <= 0 || port > 65535 {
			return nil, fmt.Errorf("port-forward: address %q has no valid port", addr)
		}
		return d.Dial(ctx, namespace, pod, port)
	}
}

func (d *Dialer) dial(ctx context.Context, namespace, pod string, port int, target string) (net.Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, upgradeTimeout)
		defer cancel()
	}
	// A round tripper holds the one connection it upgraded, so every dial
	// needs its own.
	upgrader, err := spdystream.NewRoundTripperWithConfig(spdystream.RoundTripperConfig{
		TLS:        d.tls,
		Proxier:    d.proxy(),
		PingPeriod: pingPeriod,
	})
	if err != nil {
		return nil, err
	}
	transport, err := rest.HTTPWrappersForConfig(d.cfg, upgrader)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.url(namespace, pod).String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Add(httpstream.HeaderProtocolVersion, Protocol)

	type result struct {
		conn httpstream.Connection
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := (&http.Client{Transport: transport}).Do(req)
		if err != nil {
			done <- result{err: err}
			return
		}
		defer resp.Body.Close()
		conn, err := upgrader.NewConnection(resp)
		done <- result{conn: conn, err: err}
	}()
	var r result
	select {
	case r = <-done:
	case <-ctx.Done():
		// The context ends the dial but cannot interrupt an upgrade
		// already waiting for the server's answer; close what it makes.
		go func() {
			if late := <-done; late.conn != nil {
				late.conn.Close()
			}
		}()
		return nil, ctx.Err()
	}
	if r.err != nil {
		return nil, r.err
	}
	c, err := openStreams(r.conn, port, target)
	if err != nil {
		r.conn.Close()
		return nil, err
	}
	return c, nil
}

func (d *Dialer) proxy() func(*http.Request) (*url.URL, error) {
	if d.cfg.Proxy != nil {
		return d.cfg.Proxy
	}
	return http.ProxyFromEnvironment
}

// openStreams creates the error and data streams of one forwarded
// connection to port, as the portforward.k8s.io protocol pairs them: the
// same port and request ID, the error stream first.
func openStreams(conn httpstream.Connection, port int, target string) (*streamConn, error) {
	headers := http.Header{}
	headers.Set(corev1.PortHeader, strconv.Itoa(port))
	headers.Set(corev1.PortForwardRequestIDHeader, "0")
	headers.Set(corev1.StreamType, corev1.StreamTypeError)
	errorStream, err := conn.CreateStream(headers)
	if err != nil {
		return nil, fmt.Errorf("creating the error stream: %w", err)
	}
	// Nothing is ever sent on the error stream; closing our side tells
	// the other end so.
	if err := errorStream.Close(); err != nil {
		return nil, fmt.Errorf("closing the error stream for writing: %w", err)
	}
	headers.Set(corev1.StreamType, corev1.StreamTypeData)
	dataStream, err := conn.CreateStream(headers)
	if err != nil {
		// The far end may refuse the port and reset the data stream
		// before it is fully open; its reason is then on the error stream.
		if remote := errorWithin(errorStream, time.Second); remote != nil {
			return nil, fmt.Errorf("port-forward to %s: %w", target, remote)
		}
		return nil, fmt.Errorf("creating the data stream: %w", err)
	}
	c := &streamConn{conn: conn, data: dataStream, addr: addr(target), remoteDone: make(chan struct{})}
	go c.readRemoteError(errorStream)
	return c, nil
}

// errorWithin is what the far end wrote on the error stream, if it wrote
// anything before the stream ended or wait passed.
func errorWithin(s httpstream.Stream, wait time.Duration) error {
	got := make(chan []byte, 1)
	go func() {
		msg, _ := io.ReadAll(s)
		got <- msg
	}()
	select {
	case msg := <-got:
		if len(msg) > 0 {
			return errors.New(string(msg))
		}
	case <-time.After(wait):
		s.Reset()
	}
	return nil
}

// addr names a forwarded connection's far end.
type addr string

func (a addr) Network() string { return Protocol }
func (a addr) String() string  { return string(a) }

// streamConn is one forwarded connection: the data stream of a pair, and
// the upgraded connection that carries it and nothing else.
type streamConn struct {
	conn httpstream.Connection
	data httpstream.Stream
	addr addr

	// remoteErr is what the far end reported on the error stream (it
	// could not reach the port, for example); set before remoteDone is
	// closed.
	remoteErr  error
	remoteDone chan struct{}

	mu            sync.Mutex
	closed        bool
	expired       bool
	readDeadline  *time.Timer
	writeDeadline *time.Timer
}

func (c *streamConn) readRemoteError(s httpstream.Stream) {
	defer close(c.remoteDone)
	msg, err := io.ReadAll(s)
	switch {
	case len(msg) > 0:
		c.remoteErr = errors.New(string(msg))
	case err != nil && !c.isClosed():
		c.remoteErr = fmt.Errorf("reading the error stream: %w", err)
	}
}

// remoteFailure is the error the far end reported, if any. The error
// stream ends before, or just after, the data stream does, so a little
// waiting for it is enough.
func (c *streamConn) remoteFailure() error {
	select {
	case <-c.remoteDone:
		return c.remoteErr
	case <-time.After(time.Second):
		return nil
	}
}

func (c *streamConn) Read(p []byte) (int, error) {
	n, err := c.data.Read(p)
	if err != nil {
		err = c.failure(err)
	}
	return n, err
}

func (c *streamConn) Write(p []byte) (int, error) {
	n, err := c.data.Write(p)
	if err != nil {
		err = c.failure(err)
	}
	return n, err
}

// failure turns a stream error into the one the caller should see: the
// deadline it set, or the far end's own account of what went wrong.
func (c *streamConn) failure(err error) error {
	c.mu.Lock()
	expired, closed := c.expired, c.closed
	c.mu.Unlock()
	switch {
	case expired:
		return os.ErrDeadlineExceeded
	case closed:
		return net.ErrClosed
	}
	if remote := c.remoteFailure(); remote != nil {
		return fmt.Errorf("port-forward to %s: %w", c.addr, remote)
	}
	return err
}

func (c *streamConn) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// Close ends the connection: the data stream, and the upgraded connection
// under it.
func (c *streamConn) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	for _, t := range []*time.Timer{c.readDeadline, c.writeDeadline} {
		if t != nil {
			t.Stop()
		}
	}
	c.mu.Unlock()
	_ = c.data.Close()
	return c.conn.Close()
}

func (c *streamConn) LocalAddr() net.Addr  { return addr("local") }
func (c *streamConn) RemoteAddr() net.Addr { return c.addr }

// SetDeadline sets both deadlines.
func (c *streamConn) SetDeadline(t time.Time) error {
	c.setDeadline(&c.readDeadline, t)
	c.setDeadline(&c.writeDeadline, t)
	return nil
}

// SetReadDeadline ends the connection when t passes with a read pending
// or not: a stream cannot interrupt a pending read and carry on, so a
// deadline that passes is final. Callers set deadlines around a handshake
// (gRPC, TLS), where a missed one abandons the connection anyway. The zero
// time cancels it.
func (c *streamConn) SetReadDeadline(t time.Time) error {
	c.setDeadline(&c.readDeadline, t)
	return nil
}

// SetWriteDeadline is SetReadDeadline for writes.
func (c *streamConn) SetWriteDeadline(t time.Time) error {
	c.setDeadline(&c.writeDeadline, t)
	return nil
}

func (c *streamConn) setDeadline(timer **time.Timer, t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if *timer != nil {
		(*timer).Stop()
		*timer = nil
	}
	if c.closed || c.expired || t.IsZero() {
		return
	}
	*timer = time.AfterFunc(time.Until(t), c.expire)
}

func (c *streamConn) expire() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.expired = true
	c.mu.Unlock()
	_ = c.conn.Close()
}
