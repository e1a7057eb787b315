package kubeadmconfig

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	bootstraputil "k8s.io/cluster-bootstrap/token/util"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bootstrapv1 "capstan.dev/capstan/api/bootstrap/kubeadm/v1beta2"
)

// tokenGroup is the group kubeadm's RBAC lets joining nodes act as.
const tokenGroup = "system:bootstrappers:kubeadm:default-node-token"

func tokenID(token string) string {
	id, _, _ := strings.Cut(token, ".")
	return id
}

// tokenSecret is the workload cluster Secret that makes token valid until expires.
func tokenSecret(token, description string, expires time.Time) *corev1.Secret {
	id, secret, _ := strings.Cut(token, ".")
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceSystem, Name: bootstraputil.BootstrapTokenSecretName(id)},
		Type:       bootstrapapi.SecretTypeBootstrapToken,
		Data: map[string][]byte{
			bootstrapapi.BootstrapTokenIDKey:               []byte(id),
			bootstrapapi.BootstrapTokenSecretKey:           []byte(secret),
			bootstrapapi.BootstrapTokenExpirationKey:       []byte(expires.UTC().Format(time.RFC3339)),
			bootstrapapi.BootstrapTokenUsageAuthentication: []byte("true"),
			bootstrapapi.BootstrapTokenUsageSigningKey:     []byte("true"),
			bootstrapapi.BootstrapTokenExtraGroupsKey:      []byte(tokenGroup),
			bootstrapapi.BootstrapTokenDescriptionKey:      []byte(description),
		},
	}
}

func (r *Reconciler) tokenDescription(s *scope) string {
	return fmt.Sprintf("bootstrap token of Machine %s/%s, created by Capstan's KubeadmConfig controller", s.machine.Namespace, s.machine.Name)
}

// createToken mints a bootstrap token and stores it in the workload cluster.
func (r *Reconciler) createToken(ctx context.Context, s *scope) (string, error) {
	if r.Workload == nil {
		return "", fmt.Errorf("no workload cluster access configured")
	}
	wc, err := r.Workload.GetClient(ctx, client.ObjectKeyFromObject(s.cluster))
	if err != nil {
		return "", err
	}
	token, err := bootstraputil.GenerateBootstrapToken()
	if err != nil {
		return "", err
	}
	if err := wc.Create(ctx, tokenSecret(token, r.tokenDescription(s), s.now.Add(r.tokenTTL()))); err != nil {
		return "", fmt.Errorf("creating bootstrap token secret: %w", err)
	}
	return token, nil
}

// refreshToken keeps a generated token alive while its Machine has not
// joined: the expiration moves one TTL ahead whenever less than half of it
// remains, and the next look is exactly when that happens again. Once the
// Machine has a Node the token is left to expire (the workload cluster's
// token cleaner removes it). A token Secret that vanished before the join
// (expired during a long boot, or deleted) is re-created with the same
// token, so the bootstrap data already handed to the machine stays valid:
// Machines, unlike MachinePools, never get their bootstrap data rewritten.
func (r *Reconciler) refreshToken(ctx context.Context, s *scope) (time.Duration, error) {
	cfg, m := s.config, s.machine
	if m.Status.NodeRef.Name != "" || !m.DeletionTimestamp.IsZero() {
		return 0, nil
	}
	token, err := r.generatedToken(ctx, cfg)
	if err != nil || token == "" {
		return 0, err
	}
	if r.Workload == nil {
		return 0, nil
	}
	wc, err := r.Workload.GetClient(ctx, client.ObjectKeyFromObject(s.cluster))
	if err != nil {
		return workloadRetry, nil
	}
	ttl := r.tokenTTL()
	existing := &corev1.Secret{}
	key := client.ObjectKey{Namespace: metav1.NamespaceSystem, Name: bootstraputil.BootstrapTokenSecretName(tokenID(token))}
	if err := wc.Get(ctx, key, existing); err != nil {
		if !apierrors.IsNotFound(err) {
			return workloadRetry, nil
		}
		if err := wc.Create(ctx, tokenSecret(token, r.tokenDescription(s), s.now.Add(ttl))); err != nil && !apierrors.IsAlreadyExists(err) {
			return 0, fmt.Errorf("re-creating bootstrap token secret %s: %w", key.Name, err)
		}
		r.event(cfg, corev1.EventTypeNormal, "BootstrapTokenRecreated", "Bootstrap", "The bootstrap token of Machine %s had expired before it joined; it was created again with the same ID", m.Name)
		return ttl / 2, nil
	}
	expires, err := time.Parse(time.RFC3339, string(existing.Data[bootstrapapi.BootstrapTokenExpirationKey]))
	if err != nil {
		expires = s.now // unreadable: treat as due
	}
	if remaining := expires.Sub(s.now); remaining > ttl/2 {
		return remaining - ttl/2, nil
	}
	before := existing.DeepCopy()
	existing.Data[bootstrapapi.BootstrapTokenExpirationKey] = []byte(s.now.Add(ttl).UTC().Format(time.RFC3339))
	if err := wc.Patch(ctx, existing, client.MergeFrom(before)); err != nil {
		return 0, fmt.Errorf("extending bootstrap token secret %s: %w", key.Name, err)
	}
	ctrl.LoggerFrom(ctx).V(1).Info("Extended bootstrap token", "tokenID", tokenID(token), "machine", m.Name)
	return ttl / 2, nil
}

// generatedToken is the bootstrap token this controller generated for
// cfg's join, kept with its data (or, by earlier versions, in its spec);
// "" when the join uses the user's token, a discovery file, or is an init.
func (r *Reconciler) generatedToken(ctx context.Context, cfg *bootstrapv1.KubeadmConfig) (string, error) {
	if token := cfg.Spec.JoinConfiguration.Discovery.BootstrapToken.Token; token != "" {
		if cfg.Annotations[generatedTokenAnnotation] == tokenID(token) {
			return token, nil
		}
		return "", nil
	}
	data := &corev1.Secret{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: cfg.Namespace, Name: cfg.Status.DataSecretName}, data); err != nil {
		return "", client.IgnoreNotFound(err)
	}
	return string(data.Data[tokenDataKey]), nil
}
