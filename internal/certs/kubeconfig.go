package certs

import (
	"bytes"
	"context"
	"crypto/x509"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

// KubeconfigDataKey is the key of the kubeconfig in <cluster>-kubeconfig.
const KubeconfigDataKey = "value"

// AdminLifetime is the validity of the admin client certificate in a
// generated kubeconfig.
const AdminLifetime = 365 * 24 * time.Hour

// AdminRenewBefore is how long before its expiry the admin certificate of a
// generated kubeconfig is replaced: a quarter of its year, so that a
// kubeconfig read from the Secret stays usable for months.
const AdminRenewBefore = 90 * 24 * time.Hour

// KubeconfigSecretName is the Cluster API name of a cluster's admin kubeconfig Secret.
func KubeconfigSecretName(cluster string) string { return cluster + "-kubeconfig" }

// EnsureKubeconfig keeps the Secret <cluster>-kubeconfig holding an admin
// kubeconfig for the workload cluster: server https://<endpoint>, the
// cluster CA, and a client certificate (CN kubernetes-admin, O
// system:masters) issued by ca with a new key of algorithm alg, the
// cluster's configured one.
//
// The Secret is created when missing. An existing Secret is rewritten only
// when it is ours, i.e. carries an owner reference with owner's UID, and
// its kubeconfig is unparsable, points at another server, trusts another
// CA, holds a certificate the CA did not sign, or expires within
// AdminRenewBefore. A key of another algorithm than alg is no reason to
// rewrite it: the certificate works, and a kubeconfig somebody copied from
// the Secret keeps working until it is due anyway. A Secret without that
// owner reference was supplied by the user (or by another controller) and
// is never touched: Cluster API users bring their own kubeconfig that way.
func EnsureKubeconfig(ctx context.Context, c client.Client, cluster *clusterv1.Cluster, endpoint string, ca *KeyPair, alg KeyAlgorithm, owner metav1.OwnerReference) error {
	return ensureKubeconfig(ctx, c, cluster, endpoint, ca, alg, owner, time.Now())
}

func ensureKubeconfig(ctx context.Context, c client.Client, cluster *clusterv1.Cluster, endpoint string, ca *KeyPair, alg KeyAlgorithm, owner metav1.OwnerReference, now time.Time) error {
	if endpoint == "" {
		return fmt.Errorf("cluster %s has no control plane endpoint yet: the kubeconfig needs one", cluster.Name)
	}
	server := "https://" + endpoint
	key := client.ObjectKey{Namespace: cluster.Namespace, Name: KubeconfigSecretName(cluster.Name)}
	existing := &corev1.Secret{}
	err := c.Get(ctx, key, existing)
	switch {
	case apierrors.IsNotFound(err):
		data, err := adminKubeconfig(server, cluster.Name, ca, alg, now)
		if err != nil {
			return err
		}
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: key.Namespace, Name: key.Name,
				Labels:          map[string]string{clusterv1.ClusterNameLabel: cluster.Name},
				OwnerReferences: []metav1.OwnerReference{owner},
			},
			Type: ClusterSecretType,
			Data: map[string][]byte{KubeconfigDataKey: data},
		}
		if err := c.Create(ctx, s); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating secret %s: %w", key, err)
		}
		// On AlreadyExists another writer made it in between: theirs stands.
		return nil
	case err != nil:
		return fmt.Errorf("reading secret %s: %w", key, err)
	}
	if !ownedBy(existing, owner) {
		return nil
	}
	if kubeconfigCurrent(existing.Data[KubeconfigDataKey], server, ca, now) {
		return nil
	}
	data, err := adminKubeconfig(server, cluster.Name, ca, alg, now)
	if err != nil {
		return err
	}
	before := existing.DeepCopy()
	existing.Data = map[string][]byte{KubeconfigDataKey: data}
	if err := c.Patch(ctx, existing, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("updating secret %s: %w", key, err)
	}
	return nil
}

func ownedBy(s *corev1.Secret, owner metav1.OwnerReference) bool {
	for _, ref := range s.OwnerReferences {
		if ref.UID == owner.UID {
			return true
		}
	}
	return false
}

func adminKubeconfig(server, clusterName string, ca *KeyPair, alg KeyAlgorithm, now time.Time) ([]byte, error) {
	admin, err := ca.Issue(Request{CommonName: "kubernetes-admin", Organization: []string{"system:masters"}, Client: true, Lifetime: AdminLifetime, KeyAlgorithm: alg}, now)
	if err != nil {
		return nil, fmt.Errorf("issuing the admin certificate of cluster %s: %w", clusterName, err)
	}
	return Kubeconfig(server, clusterName, clusterName+"-admin", ca.CertPEM(), admin)
}

// kubeconfigCurrent tells whether data is a kubeconfig for server that
// trusts ca and whose client certificate ca signed and stays valid for
// more than AdminRenewBefore.
func kubeconfigCurrent(data []byte, server string, ca *KeyPair, now time.Time) bool {
	cfg, err := clientcmd.Load(data)
	if err != nil {
		return false
	}
	ctx := cfg.Contexts[cfg.CurrentContext]
	if ctx == nil {
		return false
	}
	cl, user := cfg.Clusters[ctx.Cluster], cfg.AuthInfos[ctx.AuthInfo]
	if cl == nil || user == nil || cl.Server != server || !bytes.Equal(cl.CertificateAuthorityData, ca.CertPEM()) {
		return false
	}
	if len(user.ClientKeyData) == 0 {
		return false
	}
	cert, err := ParseCert(user.ClientCertificateData)
	if err != nil {
		return false
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		return false
	}
	return now.Add(AdminRenewBefore).Before(cert.NotAfter)
}
