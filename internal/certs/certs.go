package certs

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"capstan.dev/capstan/internal/atomicfile"
)

// DefaultLifetime is the validity of a leaf certificate when a Request does
// not say otherwise, as kubeadm issues them.
const DefaultLifetime = 365 * 24 * time.Hour

// backdate is how far before "now" certificates become valid, so that a
// clock a little behind on another process does not reject them.
const backdate = time.Hour

// KeyPair is a certificate and its private key.
type KeyPair struct {
	Cert *x509.Certificate
	Key  crypto.Signer
}

// Request describes a leaf certificate to issue.
type Request struct {
	CommonName   string
	Organization []string
	DNSNames     []string
	IPs          []net.IP
	// Server and Client choose the extended key usages.
	Server, Client bool
	// Lifetime is the validity from now; zero means DefaultLifetime.
	Lifetime time.Duration
	// KeyAlgorithm is the algorithm of the leaf's new key; empty means
	// DefaultKeyAlgorithm. It need not be the CA's: kubeadm issues every
	// certificate with the cluster's configured algorithm, whatever key the
	// (possibly user-supplied, possibly older) CA has.
	KeyAlgorithm KeyAlgorithm
}

// NewCA creates a self-signed certificate authority with a new key of
// algorithm alg ("" means DefaultKeyAlgorithm).
func NewCA(commonName string, alg KeyAlgorithm, now time.Time, lifetime time.Duration) (*KeyPair, error) {
	key, err := alg.newKey()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          newSerial(),
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(lifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	return sign(tmpl, tmpl, key, key)
}

// Issue signs a leaf certificate for req with the CA.
func (ca *KeyPair) Issue(req Request, now time.Time) (*KeyPair, error) {
	if !ca.Cert.IsCA {
		return nil, fmt.Errorf("certificate %q is not a certificate authority", ca.Cert.Subject.CommonName)
	}
	key, err := req.KeyAlgorithm.newKey()
	if err != nil {
		return nil, err
	}
	lifetime := req.Lifetime
	if lifetime == 0 {
		lifetime = DefaultLifetime
	}
	notAfter := now.Add(lifetime)
	// A leaf never outlives its issuer: clients would reject the chain.
	if notAfter.After(ca.Cert.NotAfter) {
		notAfter = ca.Cert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: newSerial(),
		Subject:      pkix.Name{CommonName: req.CommonName, Organization: req.Organization},
		NotBefore:    now.Add(-backdate),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		DNSNames:     req.DNSNames,
		IPAddresses:  req.IPs,
	}
	if req.Server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	if req.Client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	return sign(tmpl, ca.Cert, key, ca.Key)
}

func sign(tmpl, parent *x509.Certificate, key crypto.Signer, signer crypto.Signer) (*KeyPair, error) {
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), signer)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &KeyPair{Cert: cert, Key: key}, nil
}

// CertPEM is the certificate in PEM.
func (kp *KeyPair) CertPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: kp.Cert.Raw})
}

// KeyPEM is the private key in PEM: PKCS #1 ("RSA PRIVATE KEY") for RSA,
// SEC 1 ("EC PRIVATE KEY") for ECDSA, PKCS #8 otherwise.
func (kp *KeyPair) KeyPEM() ([]byte, error) { return encodeKey(kp.Key) }

// encodeKey writes RSA and ECDSA keys in their algorithm-specific forms
// rather than PKCS #8: that is how kubeadm writes them, and what tools
// reading a cluster's CA Secrets or pki directory look for.
func encodeKey(key crypto.Signer) ([]byte, error) {
	switch k := key.(type) {
	case *rsa.PrivateKey:
		return pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)}), nil
	case *ecdsa.PrivateKey:
		der, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			return nil, err
		}
		return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// ParseCert reads the first certificate of a PEM bundle.
func ParseCert(certPEM []byte) (*x509.Certificate, error) {
	for rest := certPEM; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			return nil, errors.New("no PEM certificate found")
		}
		if b.Type == "CERTIFICATE" {
			return x509.ParseCertificate(b.Bytes)
		}
	}
}

// ParseKey reads a PEM private key in SEC 1, PKCS #1 or PKCS #8 form, so
// that keys written by kubeadm, by other tools, and by earlier Capstan
// releases (which made ECDSA keys) all load.
func ParseKey(keyPEM []byte) (crypto.Signer, error) {
	for rest := keyPEM; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			return nil, errors.New("no PEM private key found")
		}
		switch b.Type {
		case "EC PRIVATE KEY":
			return x509.ParseECPrivateKey(b.Bytes)
		case "RSA PRIVATE KEY":
			return x509.ParsePKCS1PrivateKey(b.Bytes)
		case "PRIVATE KEY":
			k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
			if err != nil {
				return nil, err
			}
			s, ok := k.(crypto.Signer)
			if !ok {
				return nil, fmt.Errorf("private key of type %T cannot sign", k)
			}
			return s, nil
		}
	}
}

// Parse reads a certificate and its key and checks that they belong
// together.
func Parse(certPEM, keyPEM []byte) (*KeyPair, error) {
	cert, err := ParseCert(certPEM)
	if err != nil {
		return nil, fmt.Errorf("certificate: %w", err)
	}
	key, err := ParseKey(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("key: %w", err)
	}
	pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(cert.PublicKey) {
		return nil, errors.New("the private key does not match the certificate")
	}
	return &KeyPair{Cert: cert, Key: key}, nil
}

// Load reads a key pair from files.
func Load(certPath, keyPath string) (*KeyPair, error) {
	certPEM, err := os.ReadFile(certPath)
	if err != nil {
		return nil, err
	}
	keyPEM, err := os.ReadFile(keyPath)
	if err != nil {
		return nil, err
	}
	kp, err := Parse(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("%s and %s: %w", certPath, keyPath, err)
	}
	return kp, nil
}

// Write stores the pair, key first (0600) then certificate (0644), creating
// parent directories.
func (kp *KeyPair) Write(certPath, keyPath string) error {
	keyPEM, err := kp.KeyPEM()
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(keyPath, keyPEM, 0o600); err != nil {
		return err
	}
	return atomicfile.WriteFile(certPath, kp.CertPEM(), 0o644)
}

// ValidFor reports whether the certificate is valid at now and stays valid
// for at least d more.
func (kp *KeyPair) ValidFor(now time.Time, d time.Duration) bool {
	return !now.Before(kp.Cert.NotBefore) && now.Add(d).Before(kp.Cert.NotAfter)
}

// PublicKeyPin is the certificate's public key hash in kubeadm's
// caCertHashes format: "sha256:" and the hex SHA-256 of the
// SubjectPublicKeyInfo.
func PublicKeyPin(cert *x509.Certificate) string {
	sum := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// NewServiceAccountKey creates the key pair the API server signs service
// account tokens with, as PEM private and public keys, with algorithm alg
// ("" means DefaultKeyAlgorithm).
func NewServiceAccountKey(alg KeyAlgorithm) (keyPEM, pubPEM []byte, err error) {
	key, err := alg.newKey()
	if err != nil {
		return nil, nil, err
	}
	if keyPEM, err = encodeKey(key); err != nil {
		return nil, nil, err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return nil, nil, err
	}
	return keyPEM, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), nil
}

// Kubeconfig renders a self-contained kubeconfig for client, with one
// cluster, user and context; the context is named user@cluster.
func Kubeconfig(server, clusterName, userName string, caPEM []byte, client *KeyPair) ([]byte, error) {
	keyPEM, err := client.KeyPEM()
	if err != nil {
		return nil, err
	}
	contextName := userName + "@" + clusterName
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[clusterName] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	cfg.AuthInfos[userName] = &clientcmdapi.AuthInfo{ClientCertificateData: client.CertPEM(), ClientKeyData: keyPEM}
	cfg.Contexts[contextName] = &clientcmdapi.Context{Cluster: clusterName, AuthInfo: userName}
	cfg.CurrentContext = contextName
	return clientcmd.Write(*cfg)
}

func newSerial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return n.Add(n, big.NewInt(1))
}
