package controlplane

import (
	"path/filepath"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"capstan.dev/capstan/internal/certs"
)

// TestMachineKeysFollowKeyAlgorithm: the leaves and kubeconfigs a
// control-plane machine issues itself have keys of the cluster's
// algorithm, RSA-2048 by default, whatever the CAs' keys are.
func TestMachineKeysFollowKeyAlgorithm(t *testing.T) {
	for _, tc := range []struct {
		alg, want certs.KeyAlgorithm
	}{
		{alg: "", want: certs.RSA2048},
		{alg: certs.ECDSAP384, want: certs.ECDSAP384},
	} {
		t.Run(string(tc.want), func(t *testing.T) {
			dir := t.TempDir()
			p := pki(filepath.Join(dir, "pki"))
			if err := writeClusterPKI(string(p)); err != nil {
				t.Fatal(err)
			}
			c := Config{NodeName: "cp-x", PKIDir: string(p), KubeconfigDir: filepath.Join(dir, "kubernetes"),
				Ports: Ports{APIServer: 1, EtcdClient: 2, EtcdPeer: 3}, KeyAlgorithm: tc.alg}
			if err := c.defaults(); err != nil {
				t.Fatal(err)
			}
			now := time.Now()
			if err := c.ensureLeaves(p, now); err != nil {
				t.Fatal(err)
			}
			for _, l := range c.leaves() {
				kp, err := certs.Load(p.crt(l.name), p.key(l.name))
				if err != nil {
					t.Fatal(err)
				}
				if alg, err := certs.KeyAlgorithmOf(kp.Cert.PublicKey); err != nil || alg != tc.want {
					t.Errorf("%s: %s key, %v; want %s", l.name, alg, err, tc.want)
				}
			}
			ca, err := p.loadCA(clusterCA)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.writeKubeconfigs(ca, now); err != nil {
				t.Fatal(err)
			}
			for _, k := range c.kubeconfigs() {
				cfg, err := clientcmd.LoadFromFile(filepath.Join(c.KubeconfigDir, k.file))
				if err != nil {
					t.Fatal(err)
				}
				user := cfg.AuthInfos[cfg.Contexts[cfg.CurrentContext].AuthInfo]
				kp, err := certs.Parse(user.ClientCertificateData, user.ClientKeyData)
				if err != nil {
					t.Fatalf("%s: %v", k.file, err)
				}
				if alg, err := certs.KeyAlgorithmOf(kp.Cert.PublicKey); err != nil || alg != tc.want {
					t.Errorf("%s: %s key, %v; want %s", k.file, alg, err, tc.want)
				}
			}
		})
	}
}
