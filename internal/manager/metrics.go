package manager

import (
	"crypto/tls"
	"fmt"
	"net"

	certutil "k8s.io/client-go/util/cert"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// The default addresses of the metrics and probe endpoints: loopback only,
// so that a manager started on a workstation or a shared host exposes
// nothing to the network unless asked to. The in-cluster Deployment names
// its own addresses (see internal/deploy).
const (
	DefaultMetricsAddr = "127.0.0.1:8080"
	DefaultProbeAddr   = "127.0.0.1:9440"
)

// metricsOptions serve metrics as plain HTTP on a loopback address, where
// only this host's users can reach them; on any other address they are
// served over TLS and each request must carry a bearer token that the API
// server authenticates (TokenReview) and authorises for GET /metrics
// (SubjectAccessReview), as a kube-controller-manager's are.
func metricsOptions(o Options) (metricsserver.Options, error) {
	opts := metricsserver.Options{BindAddress: o.MetricsAddr}
	if o.MetricsAddr == "0" || o.MetricsAddr == "" {
		opts.BindAddress = "0"
		return opts, nil
	}
	loopback, err := isLoopback(o.MetricsAddr)
	if err != nil {
		return opts, fmt.Errorf("--metrics-bind-address %q: %w; want host:port, e.g. %s", o.MetricsAddr, err, DefaultMetricsAddr)
	}
	if loopback {
		return opts, nil
	}
	opts.SecureServing = true
	opts.FilterProvider = filters.WithAuthenticationAndAuthorization
	// HTTP/2 stays off: its stream handling has been the way to exhaust a
	// server (CVE-2023-44487), and a scraper needs nothing of it.
	tlsOpts := []func(*tls.Config){func(c *tls.Config) {
		c.NextProtos = []string{"http/1.1"}
		c.MinVersion = tls.VersionTLS12
	}}
	if o.MetricsCertDir != "" {
		opts.CertDir = o.MetricsCertDir
	} else {
		// Without a certificate of the user's, one of our own made in
		// memory: controller-runtime would otherwise look for one in a
		// world-writable temporary directory, where anyone could place a
		// pair whose key they know.
		cert, err := selfSignedCertificate()
		if err != nil {
			return opts, err
		}
		tlsOpts = append(tlsOpts, func(c *tls.Config) {
			c.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return cert, nil }
		})
	}
	opts.TLSOpts = tlsOpts
	return opts, nil
}

// isLoopback tells whether a host:port address binds loopback only; an
// empty host (every interface) does not.
func isLoopback(addr string) (bool, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, err
	}
	if host == "localhost" {
		return true, nil
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback(), nil
}

func selfSignedCertificate() (*tls.Certificate, error) {
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("capstan-manager-metrics", nil, nil)
	if err != nil {
		return nil, fmt.Errorf("a certificate for the metrics endpoint: %w", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("a certificate for the metrics endpoint: %w", err)
	}
	return &cert, nil
}
