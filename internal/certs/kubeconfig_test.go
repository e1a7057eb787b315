package certs_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/certs"
)

// adminCert reads the kubeconfig Secret back and returns its server and
// client certificate.
func adminCert(t *testing.T, ns string) (server string, s *corev1.Secret, notAfter time.Time, subject []string) {
	t.Helper()
	s = secret(t, ns, "c1-kubeconfig")
	cfg, err := clientcmd.Load(s.Data["value"])
	if err != nil {
		t.Fatalf("kubeconfig does not parse: %v", err)
	}
	ctx := cfg.Contexts[cfg.CurrentContext]
	cert, err := certs.ParseCert(cfg.AuthInfos[ctx.AuthInfo].ClientCertificateData)
	if err != nil {
		t.Fatal(err)
	}
	return cfg.Clusters[ctx.Cluster].Server, s, cert.NotAfter, append([]string{cert.Subject.CommonName}, cert.Subject.Organization...)
}

func TestEnsureKubeconfig(t *testing.T) {
	ctx := context.Background()
	cluster, owner := createCluster(t)
	ca, err := certs.NewCA("kubernetes", certs.DefaultKeyAlgorithm, time.Now(), 10*365*24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if err := certs.EnsureKubeconfigAt(ctx, env.Client, cluster, "127.0.0.1:6443", ca, certs.DefaultKeyAlgorithm, owner, now); err != nil {
		t.Fatal(err)
	}
	server, s, notAfter, subject := adminCert(t, cluster.Namespace)
	if server != "https://127.0.0.1:6443" || subject[0] != "kubernetes-admin" || len(subject) != 2 || subject[1] != "system:masters" {
		t.Errorf("server %s subject %v", server, subject)
	}
	if s.Type != certs.ClusterSecretType || s.Labels[clusterv1.ClusterNameLabel] != "c1" || len(s.OwnerReferences) != 1 {
		t.Errorf("secret metadata: type %s labels %v owners %v", s.Type, s.Labels, s.OwnerReferences)
	}

	// Nothing changed: no write.
	if err := certs.EnsureKubeconfigAt(ctx, env.Client, cluster, "127.0.0.1:6443", ca, certs.DefaultKeyAlgorithm, owner, now.Add(24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, again, _, _ := adminCert(t, cluster.Namespace); again.ResourceVersion != s.ResourceVersion {
		t.Error("an up-to-date kubeconfig was rewritten")
	}

	// Another endpoint: rewritten.
	if err := certs.EnsureKubeconfigAt(ctx, env.Client, cluster, "127.0.0.1:7443", ca, certs.DefaultKeyAlgorithm, owner, now); err != nil {
		t.Fatal(err)
	}
	if server, _, _, _ := adminCert(t, cluster.Namespace); server != "https://127.0.0.1:7443" {
		t.Errorf("endpoint change not applied: %s", server)
	}

	// Close to expiry: a new certificate.
	later := now.Add(300 * 24 * time.Hour)
	if err := certs.EnsureKubeconfigAt(ctx, env.Client, cluster, "127.0.0.1:7443", ca, certs.DefaultKeyAlgorithm, owner, later); err != nil {
		t.Fatal(err)
	}
	if _, _, renewed, _ := adminCert(t, cluster.Namespace); !renewed.After(notAfter) {
		t.Errorf("certificate expiring %s not renewed (now %s)", notAfter, renewed)
	}

	// Another CA (a user replaced the cluster CA): rewritten.
	other, _ := certs.NewCA("kubernetes", certs.DefaultKeyAlgorithm, time.Now(), time.Hour*24*3650)
	if err := certs.EnsureKubeconfigAt(ctx, env.Client, cluster, "127.0.0.1:7443", other, certs.DefaultKeyAlgorithm, owner, now); err != nil {
		t.Fatal(err)
	}
	cfg, _ := clientcmd.Load(secret(t, cluster.Namespace, "c1-kubeconfig").Data["value"])
	for _, c := range cfg.Clusters {
		if string(c.CertificateAuthorityData) != string(other.CertPEM()) {
			t.Error("kubeconfig still trusts the old CA")
		}
	}

	// Unparsable: rewritten.
	bad := secret(t, cluster.Namespace, "c1-kubeconfig")
	bad.Data["value"] = []byte("garbage")
	if err := env.Client.Update(ctx, bad); err != nil {
		t.Fatal(err)
	}
	if err := certs.EnsureKubeconfigAt(ctx, env.Client, cluster, "127.0.0.1:7443", other, certs.DefaultKeyAlgorithm, owner, now); err != nil {
		t.Fatal(err)
	}
	adminCert(t, cluster.Namespace)
}

func TestEnsureKubeconfigLeavesUserSecretAlone(t *testing.T) {
	ctx := context.Background()
	cluster, owner := createCluster(t)
	user := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: cluster.Namespace, Name: "c1-kubeconfig"},
		Data:       map[string][]byte{"value": []byte("my own kubeconfig")},
	}
	if err := env.Client.Create(ctx, user); err != nil {
		t.Fatal(err)
	}
	ca, _ := certs.NewCA("kubernetes", certs.DefaultKeyAlgorithm, time.Now(), time.Hour*24*3650)
	if err := certs.EnsureKubeconfig(ctx, env.Client, cluster, "127.0.0.1:6443", ca, certs.DefaultKeyAlgorithm, owner); err != nil {
		t.Fatal(err)
	}
	after := &corev1.Secret{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(user), after); err != nil {
		t.Fatal(err)
	}
	if after.ResourceVersion != user.ResourceVersion || string(after.Data["value"]) != "my own kubeconfig" {
		t.Error("a kubeconfig secret without our owner reference must not be touched")
	}
	if err := certs.EnsureKubeconfig(ctx, env.Client, cluster, "", ca, certs.DefaultKeyAlgorithm, owner); err == nil {
		t.Error("an empty endpoint must be an error")
	}
}
