package etcdclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"capstan.dev/capstan/internal/certs"
	"capstan.dev/capstan/internal/portforward"
)

// ClientPort is the port of the etcd static Pod that serves etcd's clients,
// as kubeadm configures it.
const ClientPort = 2379

// localhost is the name the member's serving certificate is checked for.
// A port-forward arrives at the member from inside its Pod, on the Pod's
// localhost, and kubeadm's etcd serving certificate always names
// localhost; neither the Pod's name nor a node address is in it.
const localhost = "localhost"

// Member is a client of one etcd member, reached through the workload
// cluster's API server.
type Member struct {
	*clientv3.Client
	// Pod is the member's static Pod, kube-system/etcd-<node>.
	Pod string
}

// PodConfig says how to reach an etcd member through a port-forward to
// its static Pod.
type PodConfig struct {
	// Dialer opens the port-forward through the workload cluster's API
	// server.
	Dialer *portforward.Dialer
	// Namespace and Pod name the member's static Pod.
	Namespace, Pod string
	// CA is the etcd CA: it signs the client certificate and verifies the
	// member's. KeyAlgorithm is the client key's algorithm.
	CA           *certs.KeyPair
	KeyAlgorithm certs.KeyAlgorithm
	// CommonName is the client certificate's.
	CommonName string
	// DialTimeout bounds opening the connection (0: etcd's default).
	DialTimeout time.Duration
	// Log is etcd's client logger (nil: none).
	Log *zap.Logger
}

// ForPod connects to the single etcd member of a static Pod. Each member
// gets a client of its own: an etcd client balances its requests over its
// endpoints, and a member's health, its leadership and the move of its
// leadership are questions for that member only.
//
// The connection is opened lazily; a member that cannot be reached fails
// the first request, with the port-forward's or the TLS handshake's error
// in the message.
func ForPod(ctx context.Context, pc PodConfig) (*Member, error) {
	if pc.Dialer == nil || pc.CA == nil || pc.Pod == "" {
		return nil, errors.New("etcd client: PodConfig needs a Dialer, a CA and a Pod")
	}
	leaf, err := clientCertificate(pc.CA, pc.KeyAlgorithm, pc.CommonName, time.Now())
	if err != nil {
		return nil, err
	}
	log := pc.Log
	if log == nil {
		log = zap.NewNop()
	}
	cfg := clientv3.Config{
		// The endpoint's host is the Pod's name: the dialer resolves it
		// to the Pod, and it is the TLS server name (SNI), by which Cluster
		// API's in-memory provider picks the member's certificate.
		Endpoints:   []string{"https://" + net.JoinHostPort(pc.Pod, strconv.Itoa(ClientPort))},
		DialTimeout: pc.DialTimeout,
		DialOptions: []grpc.DialOption{
			grpc.WithContextDialer(pc.Dialer.ContextDialer(pc.Namespace)),
			// The etcd client's resolver switches the channel to
			// round_robin once it is built; starting there spares the
			// connection the first balancer opens and the switch cancels,
			// which here is a whole port-forward abandoned mid-handshake.
			grpc.WithDefaultServiceConfig(`{"loadBalancingPolicy": "round_robin"}`),
		},
		TLS:     memberTLS(pc.CA.Cert, leaf, pc.Pod),
		Logger:  log,
		Context: ctx,
		// One member per client: retrying another endpoint is pointless.
		MaxUnaryRetries: 1,
	}
	if ctx == nil {
		cfg.Context = context.Background()
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("etcd client for %s/%s: %w", pc.Namespace, pc.Pod, err)
	}
	return &Member{Client: cli, Pod: pc.Namespace + "/" + pc.Pod}, nil
}

// memberTLS presents leaf and accepts a member whose certificate the etcd
// CA signed for serving localhost (see localhost). The server name sent is
// the Pod's.
func memberTLS(ca *x509.Certificate, leaf *certs.KeyPair, pod string) *tls.Config {
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	return &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{leaf.Cert.Raw}, PrivateKey: leaf.Key, Leaf: leaf.Cert}},
		ServerName:   pod,
		MinVersion:   tls.VersionTLS12,
		// The default verification would check the certificate for the
		// server name, the Pod's, which no member's certificate names;
		// VerifyConnection does the whole verification instead.
		InsecureSkipVerify: true, //nolint:gosec // verified in VerifyConnection
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("the etcd member presented no certificate")
			}
			intermediates := x509.NewCertPool()
			for _, c := range cs.PeerCertificates[1:] {
				intermediates.AddCert(c)
			}
			_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{
				Roots:         roots,
				Intermediates: intermediates,
				DNSName:       localhost,
				KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			})
			if err != nil {
				return fmt.Errorf("the etcd member's certificate: %w", err)
			}
			return nil
		},
	}
}
