package webhook

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"capstan.dev/capstan/internal/index"
)

// SecretName is the Secret that holds the webhook's authority and serving
// certificate, in Options.Namespace.
const SecretName = "capstan-webhook-cert"

// Options configure the webhook server.
type Options struct {
	// BindAddress is where the server listens, host:port; port 0 takes a
	// free one (only with a URL endpoint, which names the port it got).
	BindAddress string
	// Service, when set, is the name of the Service in Namespace, port 443,
	// through which the API server reaches the server (a manager deployed
	// into its management cluster). Unset, the API server dials
	// https://127.0.0.1:<port> (the API server runs on this host).
	Service string
	// Namespace holds the certificate Secret and the Service.
	Namespace string
	// Lifetimes of the certificates; zero means DefaultLifetimes.
	Lifetimes Lifetimes
	// Ready, when set, is called once the server is serving and the
	// configurations point at it: from then on objects the webhooks check
	// can be created.
	Ready func()
	// FilteredCache says the manager's cache holds only some objects (one
	// namespace, a watch filter), while the webhooks answer for the whole
	// cluster: the Clusters that use a class are then listed from the API
	// server.
	FilteredCache bool
}

// Server serves the admission webhooks. Every replica of the manager runs
// one (it needs no leader: the API server may call any of them).
type Server struct {
	opts    Options
	client  client.Client // writes, and reads of the objects checked (cached)
	live    client.Reader // reads of the Secret and configurations
	decoder admission.Decoder

	cert     atomic.Pointer[tls.Certificate]
	caBundle []byte
	endpoint endpoint
	id       identity
	// serving is set once the server serves and the configurations name
	// it.
	serving atomic.Bool
}

// Setup adds a webhook server with o to mgr.
func Setup(ctx context.Context, mgr ctrl.Manager, o Options) (*Server, error) {
	if o.Namespace == "" {
		return nil, errors.New("webhook: a namespace for the certificate Secret is required")
	}
	if o.Lifetimes == (Lifetimes{}) {
		o.Lifetimes = DefaultLifetimes
	}
	if err := index.ByClusterClass(ctx, mgr.GetFieldIndexer()); err != nil {
		return nil, err
	}
	s := &Server{opts: o, client: mgr.GetClient(), live: mgr.GetAPIReader(), decoder: admission.NewDecoder(mgr.GetScheme())}
	// A replica is ready once it serves: behind a Service, the API server
	// must not be sent to one that cannot answer yet.
	if err := mgr.AddReadyzCheck("webhook", func(*http.Request) error {
		if !s.serving.Load() {
			return errors.New("the admission webhooks are not serving yet")
		}
		return nil
	}); err != nil {
		return nil, err
	}
	return s, mgr.Add(s)
}

// NeedLeaderElection is false: every replica serves.
func (s *Server) NeedLeaderElection() bool { return false }

// Start listens, makes sure of the certificate and the configurations, and
// serves until ctx ends, renewing the certificate when it is due.
func (s *Server) Start(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx).WithName("webhook")
	ln, err := s.listen()
	if err != nil {
		return err
	}
	defer ln.Close()
	if err := s.setEndpoint(ln.Addr().(*net.TCPAddr)); err != nil {
		return err
	}
	if err := s.ensureNamespace(ctx); err != nil {
		return err
	}
	next, err := s.refresh(ctx)
	if err != nil {
		return err
	}

	mux := http.NewServeMux()
	mux.Handle(ClusterDefaultPath, &admission.Webhook{Handler: &clusterDefaulter{s}})
	mux.Handle(ClusterValidatePath, &admission.Webhook{Handler: &clusterValidator{s}})
	mux.Handle(ClusterClassValidatePath, &admission.Webhook{Handler: &clusterClassValidator{s}})
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{
			MinVersion:     tls.VersionTLS12,
			GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return s.cert.Load(), nil },
		},
		BaseContext: func(net.Listener) context.Context { return ctx },
	}
	served := make(chan error, 1)
	go func() { served <- srv.ServeTLS(ln, "", "") }()
	defer func() {
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()

	if err := ensureConfigurations(ctx, s.client, s.live, s.endpoint, s.caBundle); err != nil {
		return fmt.Errorf("webhook: %w", err)
	}
	s.serving.Store(true)
	defer s.serving.Store(false)
	log.Info("Serving admission webhooks", "address", ln.Addr().String(), "service", s.opts.Service, "certificateExpires", s.cert.Load().Leaf.NotAfter)
	if s.opts.Ready != nil {
		s.opts.Ready()
	}

	timer := time.NewTimer(time.Until(next))
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-served:
			return fmt.Errorf("webhook: serving: %w", err)
		case <-timer.C:
			next, err = s.refresh(ctx)
			if err == nil {
				err = ensureConfigurations(ctx, s.client, s.live, s.endpoint, s.caBundle)
			}
			if err != nil {
				// The certificate in hand is still valid: its renewal is
				// due early on purpose, so there is time to try again.
				log.Error(err, "Renewing the webhook certificate failed; retrying")
				next = time.Now().Add(time.Minute)
			}
			timer.Reset(time.Until(next))
		}
	}
}

// listen opens the server's port. Without a Service the configurations
// send the API server to 127.0.0.1, so an address without a host or with
// an unspecified one (":9443", "0.0.0.0:9443") binds loopback only: no
// other host has a reason to reach the server, and none may.
func (s *Server) listen() (net.Listener, error) {
	addr := s.opts.BindAddress
	if s.opts.Service == "" {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, fmt.Errorf("webhook: --webhook-bind-address %q is not host:port (e.g. 127.0.0.1:9443): %w", addr, err)
		}
		if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
			addr = net.JoinHostPort("127.0.0.1", port)
		}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("webhook: listening on %s: %w", addr, err)
	}
	return ln, nil
}

// setEndpoint learns how the API server reaches the server, and which names
// its certificate must carry for that.
func (s *Server) setEndpoint(addr *net.TCPAddr) error {
	if s.opts.Service != "" {
		svc := s.opts.Service + "." + s.opts.Namespace + ".svc"
		s.endpoint = endpoint{service: &admissionregistrationv1.ServiceReference{Namespace: s.opts.Namespace, Name: s.opts.Service, Port: ptr.To(int32(443))}}
		s.id = identity{DNSNames: []string{svc, svc + ".cluster.local", s.opts.Service + "." + s.opts.Namespace}}
		return nil
	}
	host := "127.0.0.1"
	if addr.IP != nil && !addr.IP.IsUnspecified() {
		if !addr.IP.IsLoopback() {
			return fmt.Errorf("webhook: without a Service the API server dials the server on loopback; bind to 127.0.0.1, not %s", addr.IP)
		}
		host = addr.IP.String()
	}
	s.endpoint = endpoint{url: "https://" + net.JoinHostPort(host, strconv.Itoa(addr.Port))}
	s.id = identity{IPs: []net.IP{net.ParseIP(host)}, DNSNames: []string{"localhost"}}
	return nil
}

// ensureNamespace creates the Secret's namespace when it does not exist
// (an embedded plane that no installation prepared).
func (s *Server) ensureNamespace(ctx context.Context) error {
	ns := &corev1.Namespace{}
	err := s.live.Get(ctx, client.ObjectKey{Name: s.opts.Namespace}, ns)
	if apierrors.IsNotFound(err) {
		ns.Name = s.opts.Namespace
		err = s.client.Create(ctx, ns)
		if apierrors.IsAlreadyExists(err) {
			err = nil
		}
	}
	if err != nil {
		return fmt.Errorf("webhook: namespace %s: %w", s.opts.Namespace, err)
	}
	return nil
}

// refresh reads the certificate Secret, renews what is due (another replica
// may have done it already), takes the serving certificate into use, and
// returns when to look again.
func (s *Server) refresh(ctx context.Context) (time.Time, error) {
	l := s.opts.Lifetimes
	for attempt := 0; ; attempt++ {
		secret := &corev1.Secret{}
		err := s.live.Get(ctx, client.ObjectKey{Namespace: s.opts.Namespace, Name: SecretName}, secret)
		exists := err == nil
		if err != nil && !apierrors.IsNotFound(err) {
			return time.Time{}, fmt.Errorf("webhook: reading Secret %s/%s: %w", s.opts.Namespace, SecretName, err)
		}
		now := time.Now()
		m := parseMaterial(secret.Data)
		r, next := l.plan(m, s.id, now)
		if r.any() {
			var data map[string][]byte
			m, data, err = l.renew(m, r, s.id, now)
			if err != nil {
				return time.Time{}, err
			}
			secret.Data = data
			if exists {
				err = s.client.Update(ctx, secret)
			} else {
				secret.ObjectMeta = metav1.ObjectMeta{Namespace: s.opts.Namespace, Name: SecretName, Labels: configLabels}
				secret.Type = corev1.SecretTypeTLS
				err = s.client.Create(ctx, secret)
			}
			if (apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err)) && attempt < 3 {
				// Another replica renewed first: take its certificate.
				continue
			}
			if err != nil {
				return time.Time{}, fmt.Errorf("webhook: storing Secret %s/%s: %w", s.opts.Namespace, SecretName, err)
			}
			_, next = l.plan(m, s.id, now)
			ctrl.LoggerFrom(ctx).WithName("webhook").Info("Renewed the webhook certificates", "authority", r.ca, "serving", r.serving,
				"servingExpires", m.serving.Cert.NotAfter, "nextCheck", next)
		}
		return next, s.use(m, now)
	}
}

// use serves m's certificate from now on.
func (s *Server) use(m material, now time.Time) error {
	key, err := m.serving.KeyPEM()
	if err != nil {
		return err
	}
	cert, err := tls.X509KeyPair(m.serving.CertPEM(), key)
	if err != nil {
		return fmt.Errorf("webhook: serving certificate: %w", err)
	}
	cert.Leaf = m.serving.Cert
	if old := s.cert.Load(); old == nil || old.Leaf.SerialNumber.Cmp(cert.Leaf.SerialNumber) != 0 {
		s.cert.Store(&cert)
	}
	s.caBundle = m.bundle(now)
	return nil
}
