package certs

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// keyShape is what a key of an algorithm must look like.
type keyShape struct {
	alg      KeyAlgorithm
	rsaBits  int            // RSA modulus size, 0 for ECDSA
	curve    elliptic.Curve // ECDSA curve, nil for RSA
	pemBlock string         // the PEM type KeyPEM writes
}

var keyShapes = []keyShape{
	{alg: "", rsaBits: 2048, pemBlock: "RSA PRIVATE KEY"},
	{alg: RSA2048, rsaBits: 2048, pemBlock: "RSA PRIVATE KEY"},
	{alg: RSA3072, rsaBits: 3072, pemBlock: "RSA PRIVATE KEY"},
	{alg: RSA4096, rsaBits: 4096, pemBlock: "RSA PRIVATE KEY"},
	{alg: ECDSAP256, curve: elliptic.P256(), pemBlock: "EC PRIVATE KEY"},
	{alg: ECDSAP384, curve: elliptic.P384(), pemBlock: "EC PRIVATE KEY"},
}

func (s keyShape) name() string {
	if s.alg == "" {
		return "default"
	}
	return string(s.alg)
}

// check fails the test unless key has the shape's type and size or curve.
func (s keyShape) check(t *testing.T, what string, key crypto.PublicKey) {
	t.Helper()
	switch k := key.(type) {
	case *rsa.PublicKey:
		if s.rsaBits == 0 || k.N.BitLen() != s.rsaBits {
			t.Errorf("%s: RSA key of %d bits, want %s", what, k.N.BitLen(), s.name())
		}
	case *ecdsa.PublicKey:
		if s.curve == nil || k.Curve != s.curve {
			t.Errorf("%s: ECDSA key on %s, want %s", what, k.Curve.Params().Name, s.name())
		}
	default:
		t.Errorf("%s: key of type %T, want %s", what, key, s.name())
	}
}

func pemType(t *testing.T, b []byte) string {
	t.Helper()
	block, _ := pem.Decode(b)
	if block == nil {
		t.Fatalf("not PEM: %q", b)
	}
	return block.Type
}

// TestKeyAlgorithms generates a CA, a leaf and a service-account key of
// every algorithm and checks each key's type, size, PEM encoding and round
// trip, and that the leaf verifies against its CA.
func TestKeyAlgorithms(t *testing.T) {
	now := time.Now()
	for _, s := range keyShapes {
		t.Run(s.name(), func(t *testing.T) {
			ca, err := NewCA("ca", s.alg, now, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			s.check(t, "CA", ca.Cert.PublicKey)
			if got, err := KeyAlgorithmOf(ca.Cert.PublicKey); err != nil || got != cmp(s.alg, DefaultKeyAlgorithm) {
				t.Errorf("KeyAlgorithmOf(CA) = %q, %v", got, err)
			}
			leaf, err := ca.Issue(Request{CommonName: "leaf", Client: true, KeyAlgorithm: s.alg}, now)
			if err != nil {
				t.Fatal(err)
			}
			s.check(t, "leaf", leaf.Cert.PublicKey)
			verifies(t, leaf, ca, now)

			for what, kp := range map[string]*KeyPair{"CA": ca, "leaf": leaf} {
				keyPEM, err := kp.KeyPEM()
				if err != nil {
					t.Fatal(err)
				}
				if got := pemType(t, keyPEM); got != s.pemBlock {
					t.Errorf("%s key PEM block %q, want %q", what, got, s.pemBlock)
				}
				back, err := Parse(kp.CertPEM(), keyPEM)
				if err != nil {
					t.Fatalf("%s does not read back: %v", what, err)
				}
				s.check(t, what+" read back", back.Key.Public())
			}

			keyPEM, pubPEM, err := NewServiceAccountKey(s.alg)
			if err != nil {
				t.Fatal(err)
			}
			if got := pemType(t, keyPEM); got != s.pemBlock {
				t.Errorf("service-account key PEM block %q, want %q", got, s.pemBlock)
			}
			key, err := ParseKey(keyPEM)
			if err != nil {
				t.Fatal(err)
			}
			s.check(t, "service-account key", key.Public())
			pub, err := parsePublicKey(pubPEM)
			if err != nil {
				t.Fatal(err)
			}
			if !key.Public().(interface{ Equal(crypto.PublicKey) bool }).Equal(pub) {
				t.Error("service-account public key does not belong to its private key")
			}
		})
	}
}

func cmp(a, fallback KeyAlgorithm) KeyAlgorithm {
	if a == "" {
		return fallback
	}
	return a
}

func verifies(t *testing.T, leaf, ca *KeyPair, now time.Time) {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	if _, err := leaf.Cert.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		t.Errorf("leaf of %T does not verify against a CA of %T: %v", leaf.Key, ca.Key, err)
	}
}

// TestLeafAlgorithmIndependentOfCA: a cluster may keep an ECDSA CA from an
// earlier release while its configuration asks for RSA, or the user may
// supply an RSA CA for an ECDSA cluster; the leaves follow the request.
func TestLeafAlgorithmIndependentOfCA(t *testing.T) {
	now := time.Now()
	for _, tc := range []struct {
		ca   KeyAlgorithm
		leaf keyShape
	}{
		{ca: RSA2048, leaf: keyShapes[4]},   // ECDSA-P256 leaf from an RSA CA
		{ca: RSA2048, leaf: keyShapes[5]},   // ECDSA-P384 leaf from an RSA CA
		{ca: ECDSAP256, leaf: keyShapes[0]}, // default (RSA-2048) leaf from an ECDSA CA
		{ca: ECDSAP384, leaf: keyShapes[1]},
	} {
		t.Run(string(tc.ca)+"/"+tc.leaf.name(), func(t *testing.T) {
			ca, err := NewCA("ca", tc.ca, now, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			leaf, err := ca.Issue(Request{CommonName: "leaf", Server: true, Client: true, KeyAlgorithm: tc.leaf.alg}, now)
			if err != nil {
				t.Fatal(err)
			}
			tc.leaf.check(t, "leaf", leaf.Cert.PublicKey)
			verifies(t, leaf, ca, now)
		})
	}
}

// TestParseKeyForms reads keys in every PEM form other tools and earlier
// Capstan releases wrote: PKCS #1 and PKCS #8 RSA, SEC 1 and PKCS #8 ECDSA.
func TestParseKeyForms(t *testing.T) {
	for _, s := range []keyShape{keyShapes[1], keyShapes[4], keyShapes[5]} {
		key, err := s.alg.newKey()
		if err != nil {
			t.Fatal(err)
		}
		pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		native, err := encodeKey(key)
		if err != nil {
			t.Fatal(err)
		}
		for form, b := range map[string][]byte{
			s.pemBlock:    native,
			"PRIVATE KEY": pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8}),
			// A bundle may carry other blocks before the key.
			"after a certificate": append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte{1}}), native...),
		} {
			got, err := ParseKey(b)
			if err != nil {
				t.Errorf("%s %s: %v", s.name(), form, err)
				continue
			}
			if !got.Public().(interface{ Equal(crypto.PublicKey) bool }).Equal(key.Public()) {
				t.Errorf("%s %s: read another key", s.name(), form)
			}
		}
	}
}

func TestUnknownKeyAlgorithm(t *testing.T) {
	for _, bad := range []KeyAlgorithm{"RSA-1024", "ed25519", "rsa-2048"} {
		if _, err := NewCA("ca", bad, time.Now(), time.Hour); err == nil || !strings.Contains(err.Error(), "RSA-2048") {
			t.Errorf("%q: got %v, want an error listing the supported algorithms", bad, err)
		}
		if _, _, err := NewServiceAccountKey(bad); err == nil {
			t.Errorf("%q: service-account key made", bad)
		}
	}
	ca, err := NewCA("ca", ECDSAP256, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ca.Issue(Request{CommonName: "x", KeyAlgorithm: "RSA-1024"}, time.Now()); err == nil {
		t.Error("issued a leaf of an unsupported algorithm")
	}
	small, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := KeyAlgorithmOf(small.Public()); err == nil {
		t.Errorf("an RSA-1024 key has algorithm %q", got)
	}
}

// TestEveryAPIEncryptionAlgorithmIsSupported reads the enum of
// clusterConfiguration.encryptionAlgorithm from the generated CRDs, so that
// a value added to the API without support here fails.
func TestEveryAPIEncryptionAlgorithmIsSupported(t *testing.T) {
	for _, tc := range []struct {
		file string
		path []string
	}{
		{"bootstrap.cluster.x-k8s.io_kubeadmconfigs.yaml", []string{"spec", "clusterConfiguration", "encryptionAlgorithm"}},
		{"controlplane.cluster.x-k8s.io_kubeadmcontrolplanes.yaml", []string{"spec", "kubeadmConfigSpec", "clusterConfiguration", "encryptionAlgorithm"}},
	} {
		data, err := os.ReadFile("../../config/crd/bases/" + tc.file)
		if err != nil {
			t.Fatal(err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(data, crd); err != nil {
			t.Fatalf("%s: %v", tc.file, err)
		}
		for _, v := range crd.Spec.Versions {
			if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
				continue
			}
			prop := *v.Schema.OpenAPIV3Schema
			for _, p := range tc.path {
				next, ok := prop.Properties[p]
				if !ok {
					t.Fatalf("%s %s: no property %s", tc.file, v.Name, strings.Join(tc.path, "."))
				}
				prop = next
			}
			if len(prop.Enum) == 0 {
				t.Fatalf("%s %s: %s has no enum", tc.file, v.Name, strings.Join(tc.path, "."))
			}
			for _, e := range prop.Enum {
				var name string
				if err := yaml.Unmarshal(e.Raw, &name); err != nil {
					t.Fatal(err)
				}
				if !slices.Contains(KeyAlgorithms(), KeyAlgorithm(name)) {
					t.Errorf("%s %s allows encryptionAlgorithm %q, which certs does not support", tc.file, v.Name, name)
				}
			}
		}
	}
}

// KeysGenerated counts each generated key under its algorithm, the empty
// one under the default; KeyCost measures without counting.
func TestKeysGeneratedCounts(t *testing.T) {
	before := KeysGenerated()
	if _, _, err := NewServiceAccountKey(""); err != nil {
		t.Fatal(err)
	}
	if _, err := NewCA("counted", ECDSAP256, time.Now(), time.Hour); err != nil {
		t.Fatal(err)
	}
	if d, err := KeyCost(ECDSAP256, 3); err != nil || d <= 0 {
		t.Fatalf("KeyCost(ECDSA-P256): %v, %v", d, err)
	}
	if _, err := KeyCost("DSA-1024", 1); err == nil {
		t.Error("KeyCost accepted an unknown algorithm")
	}
	after := KeysGenerated()
	if got := after[RSA2048] - before[RSA2048]; got != 1 {
		t.Errorf("RSA-2048 keys counted: %d, want 1 (the default's)", got)
	}
	if got := after[ECDSAP256] - before[ECDSAP256]; got != 1 {
		t.Errorf("ECDSA-P256 keys counted: %d, want 1 (KeyCost's are not counted)", got)
	}
	if _, ok := after[""]; ok {
		t.Error("keys counted under the empty algorithm")
	}
}
