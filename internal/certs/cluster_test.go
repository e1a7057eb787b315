package certs_test

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/certs"
	"capstan.dev/capstan/internal/testenv"
	"capstan.dev/capstan/test/fixture"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

// createCluster creates a Cluster to own the Secrets: the garbage collector
// would delete Secrets whose owner does not exist.
func createCluster(t *testing.T) (*clusterv1.Cluster, metav1.OwnerReference) {
	t.Helper()
	ns := env.Namespace(t)
	c := fixture.NewCluster(ns, "c1", func(c *clusterv1.Cluster) { c.Spec.ClusterNetwork.ServiceDomain = "cluster.local" })
	fixture.Create(t, env.Client, c)
	return c, metav1.OwnerReference{APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster", Name: c.Name, UID: c.UID}
}

func secret(t *testing.T, ns, name string) *corev1.Secret {
	t.Helper()
	s := &corev1.Secret{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestLookupOrGenerateCreatesTheContractSecretsOnce(t *testing.T) {
	ctx := context.Background()
	cluster, owner := createCluster(t)
	key := client.ObjectKeyFromObject(cluster)

	if _, err := certs.Lookup(ctx, env.Client, key); !certs.IsMissing(err) {
		t.Fatalf("Lookup before generation: want a missing error, have %v", err)
	}
	first, err := certs.LookupOrGenerate(ctx, env.Client, key, owner)
	if err != nil {
		t.Fatal(err)
	}
	if first.CA == nil || first.EtcdCA == nil || first.FrontProxyCA == nil || len(first.ServiceAccountKey) == 0 || len(first.ServiceAccountPub) == 0 {
		t.Fatalf("incomplete: %+v", first)
	}
	if first.CA.Cert.Subject.CommonName != "kubernetes" || !first.CA.Cert.IsCA || time.Until(first.CA.Cert.NotAfter) < 9*365*24*time.Hour {
		t.Errorf("cluster CA: CN %q CA %v until %s", first.CA.Cert.Subject.CommonName, first.CA.Cert.IsCA, first.CA.Cert.NotAfter)
	}
	versions := map[string]string{}
	for _, p := range []certs.Purpose{certs.ClusterCA, certs.EtcdCA, certs.FrontProxyCA, certs.ServiceAccount} {
		s := secret(t, cluster.Namespace, certs.SecretName(cluster.Name, p))
		if s.Type != certs.ClusterSecretType || s.Labels[clusterv1.ClusterNameLabel] != "c1" {
			t.Errorf("%s: type %q labels %v", s.Name, s.Type, s.Labels)
		}
		if len(s.OwnerReferences) != 1 || s.OwnerReferences[0].UID != cluster.UID {
			t.Errorf("%s: owners %+v", s.Name, s.OwnerReferences)
		}
		if len(s.Data["tls.crt"]) == 0 || len(s.Data["tls.key"]) == 0 {
			t.Errorf("%s: keys %v", s.Name, s.Data)
		}
		versions[s.Name] = s.ResourceVersion
	}
	if !strings.Contains(string(secret(t, cluster.Namespace, "c1-sa").Data["tls.crt"]), "PUBLIC KEY") {
		t.Error("c1-sa tls.crt must hold the public key")
	}

	again, err := certs.LookupOrGenerate(ctx, env.Client, key, owner)
	if err != nil {
		t.Fatal(err)
	}
	if !again.CA.Cert.Equal(first.CA.Cert) || !again.EtcdCA.Cert.Equal(first.EtcdCA.Cert) || string(again.ServiceAccountKey) != string(first.ServiceAccountKey) {
		t.Error("a second call must return the stored certificates, not new ones")
	}
	for name, rv := range versions {
		if s := secret(t, cluster.Namespace, name); s.ResourceVersion != rv {
			t.Errorf("%s was written again", name)
		}
	}
	looked, err := certs.Lookup(ctx, env.Client, key)
	if err != nil || !looked.FrontProxyCA.Cert.Equal(first.FrontProxyCA.Cert) {
		t.Errorf("Lookup after generation: %v", err)
	}
	if got := looked.CACertHashes(); len(got) != 1 || got[0] != certs.PublicKeyPin(first.CA.Cert) || !strings.HasPrefix(got[0], "sha256:") {
		t.Errorf("CACertHashes %v", got)
	}
}

func TestLookupOrGenerateHonoursUserCA(t *testing.T) {
	ctx := context.Background()
	cluster, owner := createCluster(t)
	userCA, err := certs.NewCA("my-ca", certs.DefaultKeyAlgorithm, time.Now(), time.Hour*24*30)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, _ := userCA.KeyPEM()
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: cluster.Namespace, Name: "c1-ca"},
		Data:       map[string][]byte{"tls.crt": userCA.CertPEM(), "tls.key": keyPEM},
	}
	if err := env.Client.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	got, err := certs.LookupOrGenerate(ctx, env.Client, client.ObjectKeyFromObject(cluster), owner)
	if err != nil {
		t.Fatal(err)
	}
	if !got.CA.Cert.Equal(userCA.Cert) {
		t.Errorf("the user's CA must be used, have %s", got.CA.Cert.Subject.CommonName)
	}
	after := secret(t, cluster.Namespace, "c1-ca")
	if after.ResourceVersion != s.ResourceVersion || len(after.OwnerReferences) != 0 {
		t.Error("the user's secret must not be written")
	}
	if got.EtcdCA == nil || got.EtcdCA.Cert.Equal(userCA.Cert) {
		t.Error("the missing etcd CA must be generated")
	}
}

func TestLookupOrGenerateRejectsInvalidUserSecret(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		data map[string][]byte
		want []string
	}{
		{"missing key", map[string][]byte{"tls.crt": []byte("x")}, []string{"c1-etcd", "has no key tls.key"}},
		{"garbage", map[string][]byte{"tls.crt": []byte("x"), "tls.key": []byte("y")}, []string{"c1-etcd", "tls.crt", "tls.key"}},
		{"not a CA", nil, []string{"c1-etcd", "not a certificate authority"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cluster, owner := createCluster(t)
			data := tc.data
			if data == nil {
				ca, _ := certs.NewCA("x", certs.DefaultKeyAlgorithm, time.Now(), time.Hour)
				leaf, _ := ca.Issue(certs.Request{CommonName: "leaf", Client: true}, time.Now())
				k, _ := leaf.KeyPEM()
				data = map[string][]byte{"tls.crt": leaf.CertPEM(), "tls.key": k}
			}
			s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: cluster.Namespace, Name: "c1-etcd"}, Data: data}
			if err := env.Client.Create(ctx, s); err != nil {
				t.Fatal(err)
			}
			_, err := certs.LookupOrGenerate(ctx, env.Client, client.ObjectKeyFromObject(cluster), owner)
			if err == nil {
				t.Fatal("want an error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			if after := secret(t, cluster.Namespace, "c1-etcd"); after.ResourceVersion != s.ResourceVersion {
				t.Error("an invalid user secret must not be overwritten")
			}
		})
	}
}

func TestLookupOrGenerateRaceConverges(t *testing.T) {
	ctx := context.Background()
	cluster, owner := createCluster(t)
	const n = 4
	results := make([]*certs.ClusterCertificates, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = certs.LookupOrGenerate(ctx, env.Client, client.ObjectKeyFromObject(cluster), owner)
		}()
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if !results[i].CA.Cert.Equal(results[0].CA.Cert) || !results[i].EtcdCA.Cert.Equal(results[0].EtcdCA.Cert) ||
			string(results[i].ServiceAccountKey) != string(results[0].ServiceAccountKey) {
			t.Errorf("caller %d got other certificates than caller 0", i)
		}
	}
	stored, err := certs.Lookup(ctx, env.Client, client.ObjectKeyFromObject(cluster))
	if err != nil || !stored.CA.Cert.Equal(results[0].CA.Cert) {
		t.Errorf("callers must use the stored CA: %v", err)
	}
}

func TestFilesLayout(t *testing.T) {
	mk := func() *certs.KeyPair {
		ca, err := certs.NewCA("x", certs.DefaultKeyAlgorithm, time.Now(), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return ca
	}
	key, pub, err := certs.NewServiceAccountKey(certs.DefaultKeyAlgorithm)
	if err != nil {
		t.Fatal(err)
	}
	cc := &certs.ClusterCertificates{CA: mk(), EtcdCA: mk(), FrontProxyCA: mk(), ServiceAccountKey: key, ServiceAccountPub: pub}
	files, err := cc.Files("")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"/etc/kubernetes/pki/ca.crt": "0640", "/etc/kubernetes/pki/ca.key": "0600",
		"/etc/kubernetes/pki/etcd/ca.crt": "0640", "/etc/kubernetes/pki/etcd/ca.key": "0600",
		"/etc/kubernetes/pki/front-proxy-ca.crt": "0640", "/etc/kubernetes/pki/front-proxy-ca.key": "0600",
		"/etc/kubernetes/pki/sa.pub": "0640", "/etc/kubernetes/pki/sa.key": "0600",
	}
	if len(files) != len(want) {
		t.Fatalf("want %d files, have %d", len(want), len(files))
	}
	for _, f := range files {
		if want[f.Path] != f.Permissions || len(f.Content) == 0 {
			t.Errorf("%s: permissions %s, %d bytes", f.Path, f.Permissions, len(f.Content))
		}
	}
	if string(files[0].Content) != string(cc.CA.CertPEM()) {
		t.Error("ca.crt content")
	}
	files, _ = cc.Files("/custom/pki")
	if files[2].Path != "/custom/pki/etcd/ca.crt" {
		t.Errorf("custom dir: %s", files[2].Path)
	}
	cc.EtcdCA = nil
	if _, err := cc.Files(""); err == nil {
		t.Error("a missing CA must be an error")
	}
}

// keyOf reads a Secret's tls.key and names its PEM block and algorithm.
func keyOf(t *testing.T, s *corev1.Secret) (block string, alg certs.KeyAlgorithm) {
	t.Helper()
	b, _ := pem.Decode(s.Data[certs.KeyKey])
	if b == nil {
		t.Fatalf("%s: tls.key is not PEM", s.Name)
	}
	key, err := certs.ParseKey(s.Data[certs.KeyKey])
	if err != nil {
		t.Fatalf("%s: %v", s.Name, err)
	}
	alg, err = certs.KeyAlgorithmOf(key.Public())
	if err != nil {
		t.Fatalf("%s: %v", s.Name, err)
	}
	return b.Type, alg
}

// TestLookupOrGenerateKeyAlgorithm: the generated CAs and service-account
// key are RSA-2048 in PKCS #1 unless the cluster asks for another algorithm.
func TestLookupOrGenerateKeyAlgorithm(t *testing.T) {
	for _, tc := range []struct {
		alg       certs.KeyAlgorithm
		want      certs.KeyAlgorithm
		wantBlock string
	}{
		{alg: "", want: certs.RSA2048, wantBlock: "RSA PRIVATE KEY"},
		{alg: certs.ECDSAP384, want: certs.ECDSAP384, wantBlock: "EC PRIVATE KEY"},
	} {
		t.Run(string(tc.want), func(t *testing.T) {
			cluster, owner := createCluster(t)
			cc, err := certs.LookupOrGenerate(context.Background(), env.Client, client.ObjectKeyFromObject(cluster), owner, certs.WithKeyAlgorithm(tc.alg))
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range []certs.Purpose{certs.ClusterCA, certs.EtcdCA, certs.FrontProxyCA, certs.ServiceAccount} {
				s := secret(t, cluster.Namespace, certs.SecretName(cluster.Name, p))
				if block, alg := keyOf(t, s); block != tc.wantBlock || alg != tc.want {
					t.Errorf("%s: %s key in a %q block, want %s in %q", s.Name, alg, block, tc.want, tc.wantBlock)
				}
			}
			if alg, err := certs.KeyAlgorithmOf(cc.CA.Cert.PublicKey); err != nil || alg != tc.want {
				t.Errorf("cluster CA certificate key %s, %v", alg, err)
			}
		})
	}
}

// TestLookupOrGenerateKeepsExistingECDSASecrets: clusters made when
// Capstan generated ECDSA keys keep their CAs; only missing Secrets are
// generated, with the algorithm asked for.
func TestLookupOrGenerateKeepsExistingECDSASecrets(t *testing.T) {
	ctx := context.Background()
	cluster, owner := createCluster(t)
	oldCA, err := certs.NewCA("kubernetes", certs.ECDSAP256, time.Now(), time.Hour*24*30)
	if err != nil {
		t.Fatal(err)
	}
	caKey, err := oldCA.KeyPEM() // SEC 1, as earlier releases wrote it
	if err != nil {
		t.Fatal(err)
	}
	saKey, saPub, err := certs.NewServiceAccountKey(certs.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	// The service-account key as PKCS #8, as other tools write it.
	parsed, err := certs.ParseKey(saKey)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(parsed)
	if err != nil {
		t.Fatal(err)
	}
	existing := map[string]map[string][]byte{
		"c1-ca": {certs.CertKey: oldCA.CertPEM(), certs.KeyKey: caKey},
		"c1-sa": {certs.CertKey: saPub, certs.KeyKey: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})},
	}
	versions := map[string]string{}
	for name, data := range existing {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: cluster.Namespace, Name: name}, Type: certs.ClusterSecretType, Data: data}
		if err := env.Client.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
		versions[name] = s.ResourceVersion
	}

	cc, err := certs.LookupOrGenerate(ctx, env.Client, client.ObjectKeyFromObject(cluster), owner)
	if err != nil {
		t.Fatal(err)
	}
	if !cc.CA.Cert.Equal(oldCA.Cert) || string(cc.ServiceAccountKey) != string(existing["c1-sa"][certs.KeyKey]) {
		t.Error("the existing CA and service-account key must be the ones in use")
	}
	for name, rv := range versions {
		if s := secret(t, cluster.Namespace, name); s.ResourceVersion != rv {
			t.Errorf("%s was rewritten", name)
		}
	}
	for _, name := range []string{"c1-etcd", "c1-proxy"} {
		if block, alg := keyOf(t, secret(t, cluster.Namespace, name)); alg != certs.RSA2048 || block != "RSA PRIVATE KEY" {
			t.Errorf("generated %s: %s in %q, want RSA-2048 in PKCS #1", name, alg, block)
		}
	}
	// Leaves issued now from the old CA get the cluster's algorithm.
	leaf, err := cc.CA.Issue(certs.Request{CommonName: "kube-apiserver", Server: true}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if alg, _ := certs.KeyAlgorithmOf(leaf.Cert.PublicKey); alg != certs.RSA2048 || leaf.Cert.CheckSignatureFrom(oldCA.Cert) != nil {
		t.Errorf("leaf from the old CA: %s key, signature %v", alg, leaf.Cert.CheckSignatureFrom(oldCA.Cert))
	}
}
