package kubelet

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kubelet/pkg/cri/streaming/portforward"
)

// ServerOptions make the kubelet serve its API: the port-forward endpoint
// the API server uses for pods/portforward.
type ServerOptions struct {
	// Port on Options.Address; 0 picks a free one. Either way the Node
	// reports it (status.daemonEndpoints.kubeletEndpoint), which is where
	// the API server connects.
	Port int
	// Certificate is the kubelet's serving certificate, valid for
	// Options.Address; an API server started with
	// --kubelet-certificate-authority verifies it.
	Certificate tls.Certificate
	// ClientCAs verify the certificates of callers. A caller is then
	// authorized by the API server, with a SubjectAccessReview of the
	// nodes/proxy subresource of this Node, as a kubelet in webhook
	// authorization mode does; the API server's kubelet client certificate
	// is normally the only caller.
	ClientCAs *x509.CertPool
}

// The kubelet's own defaults for streaming connections.
const (
	streamIdleTimeout     = 4 * time.Hour
	streamCreationTimeout = 30 * time.Second
)

// How long an authorization decision is reused: a kubelet's webhook
// authorizer caches allowed answers for 5 minutes and refusals for 30 s.
const (
	allowedTTL = 5 * time.Minute
	deniedTTL  = 30 * time.Second
)

// listen binds the kubelet API's port: done before the Node is registered,
// so that its first status already says where the API is.
func (k *kubelet) listen() error {
	so := k.o.Server
	if so == nil {
		return nil
	}
	l, err := net.Listen("tcp", net.JoinHostPort(k.o.Address, strconv.Itoa(so.Port)))
	if err != nil {
		return fmt.Errorf("kubelet: listening for the kubelet API on %s port %d: %w", k.o.Address, so.Port, err)
	}
	k.listener = l
	k.o.servingPort = int32(l.Addr().(*net.TCPAddr).Port)
	return nil
}

// serve answers the kubelet API until ctx ends.
func (k *kubelet) serve(ctx context.Context) {
	if k.listener == nil {
		return
	}
	so := k.o.Server
	mux := http.NewServeMux()
	mux.HandleFunc("/portForward/{namespace}/{pod}", k.portForward)
	mux.HandleFunc("/portForward/{namespace}/{pod}/{uid}", k.portForward)
	srv := &http.Server{
		Handler: k.authenticated(mux),
		TLSConfig: &tls.Config{
			Certificates: []tls.Certificate{so.Certificate},
			ClientCAs:    so.ClientCAs,
			ClientAuth:   tls.RequireAndVerifyClientCert,
			MinVersion:   tls.VersionTLS12,
			// SPDY upgrades need HTTP/1.1.
			NextProtos: []string{"http/1.1"},
		},
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	k.log.Info("Serving the kubelet API", "address", k.listener.Addr().String())
	if err := srv.ServeTLS(k.listener, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
		k.log.Error(err, "The kubelet API stopped serving")
	}
}

type callerKey struct{}

// caller is who presented the verified client certificate: its common
// name is the user, its organizations the groups, as the API server's own
// x509 authenticator reads a certificate.
type caller struct {
	user   string
	groups []string
}

func (k *kubelet) authenticated(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.VerifiedChains[0]) == 0 {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		cert := r.TLS.VerifiedChains[0][0]
		c := caller{user: cert.Subject.CommonName, groups: slices.Clone(cert.Subject.Organization)}
		if c.user == "" {
			http.Error(w, "Unauthorized: the client certificate names no user", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), callerKey{}, c)))
	})
}

// verbs maps HTTP methods to the verbs a kubelet authorizes them as.
var verbs = map[string]string{
	http.MethodGet: "get", http.MethodHead: "get", http.MethodPost: "create",
	http.MethodPut: "update", http.MethodPatch: "patch", http.MethodDelete: "delete",
}

// authorize asks the API server whether c may use this node's proxy
// subresource with verb, reusing a recent answer.
func (k *kubelet) authorize(ctx context.Context, c caller, verb string) (bool, string, error) {
	key := c.user + "\x00" + strings.Join(c.groups, "\x00") + "\x00" + verb
	now := time.Now()
	k.authzMu.Lock()
	d, ok := k.authzCache[key]
	k.authzMu.Unlock()
	if ok && now.Before(d.until) {
		return d.allowed, d.reason, nil
	}
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: c.user, Groups: c.groups,
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Verb: verb, Resource: "nodes", Subresource: "proxy", Name: k.o.NodeName,
		},
	}}
	res, err := k.client.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
	if err != nil {
		return false, "", err
	}
	d = authzDecision{allowed: res.Status.Allowed, reason: res.Status.Reason, until: now.Add(deniedTTL)}
	if d.allowed {
		d.until = now.Add(allowedTTL)
	}
	k.authzMu.Lock()
	for key, old := range k.authzCache {
		if now.After(old.until) {
			delete(k.authzCache, key)
		}
	}
	k.authzCache[key] = d
	k.authzMu.Unlock()
	return d.allowed, d.reason, nil
}

type authzDecision struct {
	allowed bool
	reason  string
	until   time.Time
}

func (k *kubelet) portForward(w http.ResponseWriter, r *http.Request) {
	c, _ := r.Context().Value(callerKey{}).(caller)
	verb, ok := verbs[r.Method]
	if !ok {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	allowed, reason, err := k.authorize(r.Context(), c, verb)
	if err != nil {
		k.log.Error(err, "Authorizing a kubelet API request failed", "user", c.user, "verb", verb)
		http.Error(w, "authorization failed: "+err.Error(), http.StatusInternalServerError)
		return
	}
	if !allowed {
		msg := fmt.Sprintf("Forbidden (user=%s, verb=%s, resource=nodes, subresource=proxy)", c.user, verb)
		if reason != "" {
			msg += ": " + reason
		}
		http.Error(w, msg, http.StatusForbidden)
		return
	}
	namespace, name := r.PathValue("namespace"), r.PathValue("pod")
	f, err := k.forwarderFor(namespace, name, types.UID(r.PathValue("uid")))
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	opts, err := portforward.NewV4Options(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	k.log.V(1).Info("Port-forward opened", "pod", namespace+"/"+name, "user", c.user)
	portforward.ServePortForward(w, r, f, namespace+"/"+name, types.UID(r.PathValue("uid")), opts,
		streamIdleTimeout, streamCreationTimeout, portforward.SupportedProtocols)
}

// forwarderFor finds the Pod a port-forward names among this node's: a
// static Pod of the machine's control plane, or another Pod bound here.
func (k *kubelet) forwarderFor(namespace, name string, uid types.UID) (*forwarder, error) {
	notHere := fmt.Errorf("pod %s/%s is not on node %s", namespace, name, k.o.NodeName)
	if namespace == MirrorPodNamespace {
		if sp := k.staticPodFor(name); sp != nil {
			if uid != "" && k.mirrorPodUID(name) != uid {
				return nil, notHere
			}
			return &forwarder{pod: namespace + "/" + name, ports: sp.Ports}, nil
		}
	}
	obj, exists, err := k.pods.GetByKey(namespace + "/" + name)
	if err != nil || !exists {
		return nil, notHere
	}
	if pod, ok := obj.(*corev1.Pod); !ok || (uid != "" && pod.UID != uid) {
		return nil, notHere
	}
	// Pods other than the static ones run no container that listens: the
	// ports of Capstan's own processes are the host's, and forwarding to
	// the host's loopback would reach whatever else runs there.
	return &forwarder{pod: namespace + "/" + name}, nil
}

func (k *kubelet) mirrorPodUID(name string) types.UID {
	obj, exists, err := k.pods.GetByKey(MirrorPodNamespace + "/" + name)
	if err != nil || !exists {
		return ""
	}
	if pod, ok := obj.(*corev1.Pod); ok {
		return pod.UID
	}
	return ""
}

// forwarder connects a forwarded stream to what listens on the Pod's port.
type forwarder struct {
	pod string
	// ports maps the Pod's ports to the host addresses where its component
	// listens.
	ports map[int32]string
}

func (f *forwarder) PortForward(ctx context.Context, _ string, _ types.UID, port int32, stream io.ReadWriteCloser) error {
	target, ok := f.ports[port]
	if !ok {
		return fmt.Errorf("nothing listens on port %d of pod %s on this machine", port, f.pod)
	}
	d := net.Dialer{Timeout: 5 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", target)
	if err != nil {
		return fmt.Errorf("connecting to port %d of pod %s: %w", port, f.pod, err)
	}
	defer conn.Close()
	fromPod := make(chan error, 1)
	go func() {
		_, err := io.Copy(stream, conn)
		fromPod <- err
	}()
	toPod := make(chan error, 1)
	go func() {
		_, err := io.Copy(conn, stream)
		toPod <- err
	}()
	select {
	case err := <-fromPod:
		// The Pod's side closed: the forwarded connection is over.
		return ignoreClosed(err)
	case err := <-toPod:
		if err != nil {
			return ignoreClosed(err)
		}
		// The caller is done sending; the Pod may still answer.
		if tcp, ok := conn.(*net.TCPConn); ok {
			_ = tcp.CloseWrite()
		}
		return ignoreClosed(<-fromPod)
	}
}

// ignoreClosed drops the errors of a connection closed at either end,
// which is how forwarded connections normally end.
func ignoreClosed(err error) error {
	if err == nil || errors.Is(err, net.ErrClosed) || errors.Is(err, io.EOF) {
		return nil
	}
	return err
}
