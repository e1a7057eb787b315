package kubeadmconfig_test

import (
	"context"
	"crypto/x509"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bootstrapv1 "capstan.dev/capstan/api/bootstrap/kubeadm/v1beta2"
	"capstan.dev/capstan/internal/certs"
	"capstan.dev/capstan/internal/controllers/kubeadmconfig"
	"capstan.dev/capstan/internal/kubeadm"
	"capstan.dev/capstan/test/fixture"
)

// TestInitControlPlaneKeyAlgorithm: the cluster certificates a bare
// control-plane Machine's KubeadmConfig generates, and the admin
// kubeconfig's client certificate, are RSA-2048 unless the
// clusterConfiguration's encryptionAlgorithm names another algorithm.
func TestInitControlPlaneKeyAlgorithm(t *testing.T) {
	for _, tc := range []struct {
		name      string
		set       bootstrapv1.EncryptionAlgorithmType
		want      certs.KeyAlgorithm
		wantBlock string
	}{
		{name: "default", want: certs.RSA2048, wantBlock: "RSA PRIVATE KEY"},
		{name: "ECDSA-P384", set: bootstrapv1.EncryptionAlgorithmECDSAP384, want: certs.ECDSAP384, wantBlock: "EC PRIVATE KEY"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			ns := mgmt.Namespace(t)
			c := createCluster(t, ns, clusterOpts{provisioned: true})
			spec := initSpec()
			spec.ClusterConfiguration.EncryptionAlgorithm = tc.set
			cfg, _ := newMachine(t, c, "cp-0", true, spec)
			_, data := waitData(t, cfg)

			for _, name := range []string{"c1-ca", "c1-etcd", "c1-proxy", "c1-sa"} {
				s := &corev1.Secret{}
				if err := mgmt.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
					t.Fatal(err)
				}
				if block, alg := fixture.PrivateKey(t, name, s.Data[certs.KeyKey]); block != tc.wantBlock || alg != tc.want {
					t.Errorf("%s tls.key: %s in a %q block, want %s in %q", name, alg, block, tc.want, tc.wantBlock)
				}
			}
			// The machine gets the very keys of the Secrets.
			stored, err := certs.Lookup(ctx, mgmt.Client, client.ObjectKeyFromObject(c))
			if err != nil {
				t.Fatal(err)
			}
			caKey, err := stored.CA.KeyPEM()
			if err != nil {
				t.Fatal(err)
			}
			if files(data)["/etc/kubernetes/pki/ca.key"].Content != string(caKey) {
				t.Error("ca.key in the bootstrap data is not the stored CA key")
			}
			// kubeadm on the machine is told the algorithm for its own keys.
			docs, err := kubeadm.Parse([]byte(files(data)[kubeadmconfig.InitConfigPath].Content))
			if err != nil {
				t.Fatal(err)
			}
			if got := certs.KeyAlgorithm(docs.Cluster.EncryptionAlgorithmType()); got != tc.want {
				t.Errorf("kubeadm configuration encryptionAlgorithm %q, want %q", got, tc.want)
			}

			kc := &corev1.Secret{}
			if err := mgmt.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "c1-kubeconfig"}, kc); err != nil {
				t.Fatal(err)
			}
			kubeconfigClientKey(t, kc.Data["value"], stored.CA, tc.want)
		})
	}
}

// kubeconfigClientKey checks that the kubeconfig's client certificate was
// issued by ca for its key, and that the key is of algorithm want.
func kubeconfigClientKey(t *testing.T, data []byte, ca *certs.KeyPair, want certs.KeyAlgorithm) {
	t.Helper()
	cfg, err := clientcmd.Load(data)
	if err != nil {
		t.Fatal(err)
	}
	user := cfg.AuthInfos[cfg.Contexts[cfg.CurrentContext].AuthInfo]
	// Parse also checks that the key belongs to the certificate.
	kp, err := certs.Parse(user.ClientCertificateData, user.ClientKeyData)
	if err != nil {
		t.Fatalf("kubeconfig client certificate and key: %v", err)
	}
	if _, alg := fixture.PrivateKey(t, "kubeconfig client key", user.ClientKeyData); alg != want {
		t.Errorf("kubeconfig client key is %s, want %s", alg, want)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	if _, err := kp.Cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("kubeconfig client certificate does not verify against the cluster CA: %v", err)
	}
}
