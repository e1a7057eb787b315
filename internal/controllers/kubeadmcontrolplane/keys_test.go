package kubeadmcontrolplane_test

import (
	"context"
	"crypto/x509"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bootstrapv1 "capstan.dev/capstan/api/bootstrap/kubeadm/v1beta2"
	"capstan.dev/capstan/internal/certs"
	"capstan.dev/capstan/test/fixture"
	"capstan.dev/capstan/test/provider"
)

// TestCertificatesKeyAlgorithm: a new cluster's CA Secrets hold RSA-2048
// keys (PKCS #1, as providers written for Cluster API read them) unless
// the control plane's clusterConfiguration.encryptionAlgorithm names
// another algorithm, and the admin kubeconfig's client key follows it.
func TestCertificatesKeyAlgorithm(t *testing.T) {
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
			ns := planes.Mgmt.Namespace(t)
			ctx := context.Background()
			c := planes.Mgmt.Client
			// Nothing listens on the endpoint: only the certificates,
			// which need no workload cluster, are looked at.
			infra, kcp, cluster := controlPlaneObjects(ns, 1, 1)
			kcp.Spec.KubeadmConfigSpec.ClusterConfiguration.EncryptionAlgorithm = tc.set
			for _, o := range []client.Object{infra, provider.InfraMachineTemplate.New(ns, "cp", map[string]any{"template": map[string]any{"spec": map[string]any{}}}), kcp, cluster} {
				if err := c.Create(ctx, o); err != nil {
					t.Fatalf("creating %s: %v", o.GetName(), err)
				}
			}
			if err := provider.SetStatus(ctx, c, infra, map[string]any{"initialization": map[string]any{"provisioned": true}}); err != nil {
				t.Fatal(err)
			}
			secrets := map[string]*corev1.Secret{}
			fixture.Eventually(t, "certificates and kubeconfig", 30*time.Second, func(context.Context) string {
				for _, name := range []string{"c-ca", "c-etcd", "c-proxy", "c-sa", "c-kubeconfig"} {
					s := &corev1.Secret{}
					if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
						return name + ": " + err.Error()
					}
					secrets[name] = s
				}
				return ""
			})
			for _, name := range []string{"c-ca", "c-etcd", "c-proxy", "c-sa"} {
				if block, alg := fixture.PrivateKey(t, name, secrets[name].Data[certs.KeyKey]); block != tc.wantBlock || alg != tc.want {
					t.Errorf("%s tls.key: %s in a %q block, want %s in %q", name, alg, block, tc.want, tc.wantBlock)
				}
			}
			ca, err := certs.Parse(secrets["c-ca"].Data[certs.CertKey], secrets["c-ca"].Data[certs.KeyKey])
			if err != nil {
				t.Fatal(err)
			}
			if alg, err := certs.KeyAlgorithmOf(ca.Cert.PublicKey); err != nil || alg != tc.want {
				t.Errorf("c-ca certificate's key %s, %v; want %s", alg, err, tc.want)
			}

			cfg, err := clientcmd.Load(secrets["c-kubeconfig"].Data["value"])
			if err != nil {
				t.Fatal(err)
			}
			user := cfg.AuthInfos[cfg.Contexts[cfg.CurrentContext].AuthInfo]
			// Parse also checks that the key belongs to the certificate.
			admin, err := certs.Parse(user.ClientCertificateData, user.ClientKeyData)
			if err != nil {
				t.Fatalf("kubeconfig client certificate and key: %v", err)
			}
			if block, alg := fixture.PrivateKey(t, "kubeconfig client key", user.ClientKeyData); block != tc.wantBlock || alg != tc.want {
				t.Errorf("kubeconfig client key: %s in a %q block, want %s", alg, block, tc.want)
			}
			pool := x509.NewCertPool()
			pool.AddCert(ca.Cert)
			if _, err := admin.Cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
				t.Errorf("kubeconfig client certificate does not verify against c-ca: %v", err)
			}
		})
	}
}
