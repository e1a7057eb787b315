package certs

import (
	"context"
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ClusterSecretType is the type of the Secrets Cluster API keeps for a
// cluster in the management cluster (certificates, kubeconfig, bootstrap data).
const ClusterSecretType corev1.SecretType = "cluster.x-k8s.io/secret"

// clusterNameLabel is Cluster API's cluster-name label (kept here as a
// string so the certificate primitives do not depend on the API packages).
const clusterNameLabel = "cluster.x-k8s.io/cluster-name"

// Keys of a certificate Secret, as in Cluster API and kubernetes.io/tls.
const (
	CertKey = "tls.crt"
	KeyKey  = "tls.key"
)

// DefaultCALifetime is the validity of a generated cluster CA: ten years, as
// kubeadm gives its own CAs.
const DefaultCALifetime = 10 * 365 * 24 * time.Hour

// DefaultCertificatesDir is where kubeadm looks for the cluster certificates.
const DefaultCertificatesDir = "/etc/kubernetes/pki"

// Purpose names one of a cluster's certificate Secrets: <cluster>-<purpose>.
type Purpose string

// The certificate Secrets of the Cluster API contract.
const (
	ClusterCA      Purpose = "ca"    // the cluster CA: API server, kubelets, clients
	EtcdCA         Purpose = "etcd"  // etcd's own CA: members and their clients
	FrontProxyCA   Purpose = "proxy" // the aggregation layer's front proxy CA
	ServiceAccount Purpose = "sa"    // the service-account token signing key pair
)

// purposes is the order in which the Secrets are read and generated.
var purposes = []Purpose{ClusterCA, EtcdCA, FrontProxyCA, ServiceAccount}

// caCommonNames are the subjects kubeadm gives the CAs it creates itself.
var caCommonNames = map[Purpose]string{ClusterCA: "kubernetes", EtcdCA: "etcd-ca", FrontProxyCA: "front-proxy-ca"}

// SecretName is the name of a cluster's certificate Secret.
func SecretName(cluster string, p Purpose) string { return cluster + "-" + string(p) }

// ClusterCertificates are a cluster's CAs and service-account key pair.
type ClusterCertificates struct {
	CA           *KeyPair
	EtcdCA       *KeyPair
	FrontProxyCA *KeyPair
	// ServiceAccountKey and ServiceAccountPub are PEM private and public keys.
	ServiceAccountKey []byte
	ServiceAccountPub []byte
}

// MissingError says which certificate Secrets do not exist.
type MissingError struct{ Secrets []string }

func (e *MissingError) Error() string {
	return fmt.Sprintf("cluster certificate secrets %s do not exist yet: they are generated when the first control plane machine is bootstrapped, or can be supplied by the user", strings.Join(e.Secrets, ", "))
}

// IsMissing tells whether err is (or wraps) a MissingError.
func IsMissing(err error) bool {
	var m *MissingError
	return errors.As(err, &m)
}

// Option tunes LookupOrGenerate.
type Option func(*options)

type options struct {
	caLifetime   time.Duration
	keyAlgorithm KeyAlgorithm
	now          func() time.Time
}

// WithKeyAlgorithm sets the algorithm of the keys of generated CAs and of
// the service-account key (default DefaultKeyAlgorithm). Secrets that exist
// keep their keys, whatever their algorithm: replacing a CA would cut off
// every machine and client of a running cluster.
func WithKeyAlgorithm(a KeyAlgorithm) Option {
	return func(o *options) { o.keyAlgorithm = a }
}

// WithCALifetime sets the validity of generated CAs (default DefaultCALifetime).
func WithCALifetime(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.caLifetime = d
		}
	}
}

// Lookup reads the certificate Secrets of cluster without generating any.
// A missing Secret gives a MissingError listing all missing ones; an invalid
// one an error naming the Secret and key.
func Lookup(ctx context.Context, c client.Reader, cluster client.ObjectKey) (*ClusterCertificates, error) {
	cc := &ClusterCertificates{}
	var missing []string
	for _, p := range purposes {
		s := &corev1.Secret{}
		key := client.ObjectKey{Namespace: cluster.Namespace, Name: SecretName(cluster.Name, p)}
		if err := c.Get(ctx, key, s); err != nil {
			if apierrors.IsNotFound(err) {
				missing = append(missing, key.Name)
				continue
			}
			return nil, fmt.Errorf("reading secret %s: %w", key, err)
		}
		if err := cc.set(p, s); err != nil {
			return nil, err
		}
	}
	if len(missing) > 0 {
		return cc, &MissingError{Secrets: missing}
	}
	return cc, nil
}

// LookupOrGenerate reads the certificate Secrets of cluster and creates the
// missing ones. Secrets that exist (supplied by the user, or generated
// earlier) are never overwritten. Two controllers may race to generate: the
// loser of a create reads and uses the winner's Secret. owner is put on
// generated Secrets; pass the Cluster so they live exactly as long as it.
func LookupOrGenerate(ctx context.Context, c client.Client, cluster client.ObjectKey, owner metav1.OwnerReference, opts ...Option) (*ClusterCertificates, error) {
	o := options{caLifetime: DefaultCALifetime, now: time.Now}
	for _, f := range opts {
		f(&o)
	}
	cc, err := Lookup(ctx, c, cluster)
	if err == nil || !IsMissing(err) {
		return cc, err
	}
	var missing *MissingError
	errors.As(err, &missing)
	// The keys are generated side by side: a new cluster's four take
	// about half a second one after the other with RSA-2048, and every
	// Machine of the cluster waits for them.
	purposes := make([]Purpose, len(missing.Secrets))
	datas := make([]map[string][]byte, len(missing.Secrets))
	var g errgroup.Group
	for i, name := range missing.Secrets {
		purposes[i] = Purpose(strings.TrimPrefix(name, cluster.Name+"-"))
		g.Go(func() error {
			data, err := generate(purposes[i], o)
			if err != nil {
				return fmt.Errorf("generating %s: %w", name, err)
			}
			datas[i] = data
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	for i, name := range missing.Secrets {
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: cluster.Namespace, Name: name,
				Labels:          map[string]string{clusterNameLabel: cluster.Name},
				OwnerReferences: []metav1.OwnerReference{owner},
			},
			Type: ClusterSecretType,
			Data: datas[i],
		}
		if err := c.Create(ctx, s); err != nil {
			if !apierrors.IsAlreadyExists(err) {
				return nil, fmt.Errorf("creating secret %s/%s: %w", cluster.Namespace, name, err)
			}
			// Someone else generated it first: theirs is the one in use.
			if err := c.Get(ctx, client.ObjectKeyFromObject(s), s); err != nil {
				return nil, fmt.Errorf("reading secret %s/%s: %w", cluster.Namespace, name, err)
			}
		}
		if err := cc.set(purposes[i], s); err != nil {
			return nil, err
		}
	}
	return cc, nil
}

func generate(p Purpose, o options) (map[string][]byte, error) {
	if p == ServiceAccount {
		key, pub, err := NewServiceAccountKey(o.keyAlgorithm)
		if err != nil {
			return nil, err
		}
		return map[string][]byte{KeyKey: key, CertKey: pub}, nil
	}
	ca, err := NewCA(caCommonNames[p], o.keyAlgorithm, o.now(), o.caLifetime)
	if err != nil {
		return nil, err
	}
	key, err := ca.KeyPEM()
	if err != nil {
		return nil, err
	}
	return map[string][]byte{KeyKey: key, CertKey: ca.CertPEM()}, nil
}

// set validates Secret s as purpose p and stores it.
func (cc *ClusterCertificates) set(p Purpose, s *corev1.Secret) error {
	where := fmt.Sprintf("secret %s/%s", s.Namespace, s.Name)
	for _, k := range []string{CertKey, KeyKey} {
		if len(s.Data[k]) == 0 {
			return fmt.Errorf("%s has no key %s: put the PEM %s there, or delete the secret to have one generated", where, k, describeKey(p, k))
		}
	}
	if p == ServiceAccount {
		key, err := ParseKey(s.Data[KeyKey])
		if err != nil {
			return fmt.Errorf("%s key %s is not a PEM private key: %w", where, KeyKey, err)
		}
		pub, err := parsePublicKey(s.Data[CertKey])
		if err != nil {
			return fmt.Errorf("%s key %s is not a PEM public key: %w", where, CertKey, err)
		}
		if eq, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool }); !ok || !eq.Equal(pub) {
			return fmt.Errorf("%s: the public key in %s does not belong to the private key in %s; put the matching pair there", where, CertKey, KeyKey)
		}
		cc.ServiceAccountKey, cc.ServiceAccountPub = s.Data[KeyKey], s.Data[CertKey]
		return nil
	}
	kp, err := Parse(s.Data[CertKey], s.Data[KeyKey])
	if err != nil {
		return fmt.Errorf("%s keys %s and %s: %w; put a PEM CA certificate and its private key there", where, CertKey, KeyKey, err)
	}
	if !kp.Cert.IsCA {
		return fmt.Errorf("%s key %s is not a certificate authority (basic constraints CA:TRUE missing); supply a CA certificate", where, CertKey)
	}
	switch p {
	case ClusterCA:
		cc.CA = kp
	case EtcdCA:
		cc.EtcdCA = kp
	case FrontProxyCA:
		cc.FrontProxyCA = kp
	}
	return nil
}

func describeKey(p Purpose, k string) string {
	switch {
	case p == ServiceAccount && k == KeyKey:
		return "service-account private key"
	case p == ServiceAccount:
		return "service-account public key"
	case k == KeyKey:
		return "CA private key"
	default:
		return "CA certificate"
	}
}

// File is a file for cloud-init's write_files.
type File struct {
	Path        string
	Content     []byte
	Permissions string
}

// Files are the certificates a control-plane machine needs before kubeadm
// init or a control-plane join, in kubeadm's layout under dir ("" means
// DefaultCertificatesDir): keys 0600, certificates 0640.
func (cc *ClusterCertificates) Files(dir string) ([]File, error) {
	if dir == "" {
		dir = DefaultCertificatesDir
	}
	var files []File
	for _, e := range []struct {
		kp   *KeyPair
		base string
	}{{cc.CA, "ca"}, {cc.EtcdCA, "etcd/ca"}, {cc.FrontProxyCA, "front-proxy-ca"}} {
		if e.kp == nil {
			return nil, fmt.Errorf("cluster certificates: %s is missing", e.base)
		}
		key, err := e.kp.KeyPEM()
		if err != nil {
			return nil, err
		}
		files = append(files,
			File{Path: path.Join(dir, e.base+".crt"), Content: e.kp.CertPEM(), Permissions: "0640"},
			File{Path: path.Join(dir, e.base+".key"), Content: key, Permissions: "0600"})
	}
	if len(cc.ServiceAccountKey) == 0 || len(cc.ServiceAccountPub) == 0 {
		return nil, errors.New("cluster certificates: the service-account key pair is missing")
	}
	files = append(files,
		File{Path: path.Join(dir, "sa.pub"), Content: cc.ServiceAccountPub, Permissions: "0640"},
		File{Path: path.Join(dir, "sa.key"), Content: cc.ServiceAccountKey, Permissions: "0600"})
	return files, nil
}

// CACertHashes pins the cluster CA for kubeadm's token discovery.
func (cc *ClusterCertificates) CACertHashes() []string {
	if cc.CA == nil {
		return nil
	}
	return []string{PublicKeyPin(cc.CA.Cert)}
}

// parsePublicKey reads the first PEM public key (PKIX, or PKCS #1 RSA).
func parsePublicKey(b []byte) (crypto.PublicKey, error) {
	for rest := b; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return nil, errors.New("no PEM public key found")
		}
		switch block.Type {
		case "PUBLIC KEY":
			return x509.ParsePKIXPublicKey(block.Bytes)
		case "RSA PUBLIC KEY":
			return x509.ParsePKCS1PublicKey(block.Bytes)
		}
	}
}
