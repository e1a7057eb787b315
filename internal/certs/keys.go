package certs

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"time"

	bootstrapv1 "capstan.dev/capstan/api/bootstrap/kubeadm/v1beta2"
)

// KeyAlgorithm is the type and size of a generated private key. Its values
// are kubeadm's encryptionAlgorithm names, which Cluster API's
// ClusterConfiguration.encryptionAlgorithm and kubeadm's own configuration
// spell alike, so a value of either converts to it directly; the constants
// below are tied to the API's so that the two cannot drift apart.
type KeyAlgorithm string

// The key algorithms a cluster's configuration may ask for.
const (
	RSA2048   = KeyAlgorithm(bootstrapv1.EncryptionAlgorithmRSA2048)
	RSA3072   = KeyAlgorithm(bootstrapv1.EncryptionAlgorithmRSA3072)
	RSA4096   = KeyAlgorithm(bootstrapv1.EncryptionAlgorithmRSA4096)
	ECDSAP256 = KeyAlgorithm(bootstrapv1.EncryptionAlgorithmECDSAP256)
	ECDSAP384 = KeyAlgorithm(bootstrapv1.EncryptionAlgorithmECDSAP384)
)

// DefaultKeyAlgorithm is what an empty KeyAlgorithm stands for. It is
// kubeadm's and Cluster API's default, and the key type providers written
// for Cluster API expect when they read a cluster's CA Secrets.
const DefaultKeyAlgorithm = RSA2048

// KeyAlgorithms lists every supported algorithm.
func KeyAlgorithms() []KeyAlgorithm {
	return []KeyAlgorithm{RSA2048, RSA3072, RSA4096, ECDSAP256, ECDSAP384}
}

// FromEncryptionAlgorithm is the key algorithm a KubeadmConfigSpec's
// clusterConfiguration.encryptionAlgorithm asks for (empty: the default).
func FromEncryptionAlgorithm(a bootstrapv1.EncryptionAlgorithmType) KeyAlgorithm {
	return KeyAlgorithm(a)
}

// Validate tells whether a is empty or one of KeyAlgorithms.
func (a KeyAlgorithm) Validate() error {
	if a == "" {
		return nil
	}
	for _, k := range KeyAlgorithms() {
		if a == k {
			return nil
		}
	}
	names := make([]string, 0, len(KeyAlgorithms()))
	for _, k := range KeyAlgorithms() {
		names = append(names, string(k))
	}
	return fmt.Errorf("key algorithm %q is not supported: use one of %s", string(a), strings.Join(names, ", "))
}

// keyGeneration bounds how many RSA keys are generated at once to the CPUs
// Go runs on: generating one is pure computation, and more at once would
// only slow each one down and starve the rest of the process.
var keyGeneration = make(chan struct{}, runtime.GOMAXPROCS(0))

// generated counts the keys this process generated, by algorithm.
var generated = struct {
	sync.Mutex
	n map[KeyAlgorithm]int64
}{n: map[KeyAlgorithm]int64{}}

// KeysGenerated is how many private keys this process has generated, by
// algorithm (the empty algorithm counted as the default): the benchmarks'
// measure of key work.
func KeysGenerated() map[KeyAlgorithm]int64 {
	generated.Lock()
	defer generated.Unlock()
	out := make(map[KeyAlgorithm]int64, len(generated.n))
	for a, n := range generated.n {
		out[a] = n
	}
	return out
}

// normalized is a, checked, with the empty algorithm as the default.
func (a KeyAlgorithm) normalized() (KeyAlgorithm, error) {
	if err := a.Validate(); err != nil {
		return "", err
	}
	if a == "" {
		return DefaultKeyAlgorithm, nil
	}
	return a, nil
}

// newKey generates a private key. RSA keys take tens of milliseconds
// (RSA-2048) to about a second (RSA-4096) each, ECDSA keys microseconds;
// callers that mint keys often should reuse them while they are valid.
func (a KeyAlgorithm) newKey() (crypto.Signer, error) {
	a, err := a.normalized()
	if err != nil {
		return nil, err
	}
	// ECDSA keys take microseconds: they do not wait behind RSA ones.
	rsaKey := a == RSA2048 || a == RSA3072 || a == RSA4096
	if rsaKey {
		keyGeneration <- struct{}{}
	}
	key, err := a.generate()
	if rsaKey {
		<-keyGeneration
	}
	if err == nil {
		generated.Lock()
		generated.n[a]++
		generated.Unlock()
	}
	return key, err
}

func (a KeyAlgorithm) generate() (crypto.Signer, error) {
	switch a {
	case "", RSA2048:
		return rsa.GenerateKey(rand.Reader, 2048)
	case RSA3072:
		return rsa.GenerateKey(rand.Reader, 3072)
	case RSA4096:
		return rsa.GenerateKey(rand.Reader, 4096)
	case ECDSAP256:
		return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case ECDSAP384:
		return ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	}
	return nil, a.Validate()
}

// KeyAlgorithmOf names the algorithm of a public key, for example a CA
// certificate's, so that a credential minted before the cluster's
// configuration can be read matches the CA it comes from.
func KeyAlgorithmOf(pub crypto.PublicKey) (KeyAlgorithm, error) {
	switch k := pub.(type) {
	case *rsa.PublicKey:
		if k.N == nil {
			return "", fmt.Errorf("RSA key without a modulus")
		}
		switch k.N.BitLen() {
		case 2048:
			return RSA2048, nil
		case 3072:
			return RSA3072, nil
		case 4096:
			return RSA4096, nil
		}
		return "", fmt.Errorf("RSA key of %d bits matches no supported key algorithm", k.N.BitLen())
	case *ecdsa.PublicKey:
		switch k.Curve {
		case elliptic.P256():
			return ECDSAP256, nil
		case elliptic.P384():
			return ECDSAP384, nil
		}
		return "", fmt.Errorf("ECDSA key on curve %s matches no supported key algorithm", k.Curve.Params().Name)
	}
	return "", fmt.Errorf("key of type %T matches no supported key algorithm", pub)
}

// KeyCost is how long one key of algorithm a takes to generate on one CPU,
// the mean of n keys generated one after the other (not counted in
// KeysGenerated).
func KeyCost(a KeyAlgorithm, n int) (time.Duration, error) {
	a, err := a.normalized()
	if err != nil {
		return 0, err
	}
	if n < 1 {
		n = 1
	}
	start := time.Now()
	for i := 0; i < n; i++ {
		if _, err := a.generate(); err != nil {
			return 0, err
		}
	}
	return time.Since(start) / time.Duration(n), nil
}
