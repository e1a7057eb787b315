package console

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"capstan.dev/capstan/internal/scheme"
	"capstan.dev/capstan/internal/workload"
)

// workloadClients keeps one client per workload cluster, made from its
// kubeconfig Secret and remade when the Secret changes. The Secret is read
// with the user's credentials every time, so that a user who may not read
// it gets no Nodes even if another user's view made the client.
type workloadClients struct {
	timeout time.Duration
	mu      sync.Mutex
	clients map[client.ObjectKey]workloadClient
}

type workloadClient struct {
	secretVersion string
	client        client.Client
}

func newWorkloadClients(timeout time.Duration) *workloadClients {
	return &workloadClients{timeout: timeout, clients: map[client.ObjectKey]workloadClient{}}
}

// kubeconfig reads the workload cluster's admin kubeconfig Secret with
// secrets (the user's client).
func kubeconfigSecret(ctx context.Context, secrets client.Reader, cluster client.ObjectKey) (*corev1.Secret, error) {
	secret := &corev1.Secret{}
	key := client.ObjectKey{Namespace: cluster.Namespace, Name: workload.KubeconfigSecretName(cluster.Name)}
	if err := secrets.Get(ctx, key, secret); err != nil {
		return nil, err
	}
	return secret, nil
}

// list reads the Nodes of the workload cluster; its error says why not.
func (w *workloadClients) list(ctx context.Context, secrets client.Reader, cluster client.ObjectKey) ([]corev1.Node, error) {
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	secretName := workload.KubeconfigSecretName(cluster.Name)
	secret, err := kubeconfigSecret(ctx, secrets, cluster)
	switch {
	case apierrors.IsForbidden(err):
		return nil, fmt.Errorf("you may not read Secret %s/%s, the workload cluster's kubeconfig, so its Nodes cannot be shown: %w", cluster.Namespace, secretName, err)
	case apierrors.IsNotFound(err):
		return nil, fmt.Errorf("the workload cluster has no kubeconfig yet (no Secret %s/%s)", cluster.Namespace, secretName)
	case err != nil:
		return nil, fmt.Errorf("reading Secret %s/%s: %w", cluster.Namespace, secretName, err)
	}
	c, err := w.client(cluster, secret)
	if err != nil {
		return nil, err
	}
	nodes := &corev1.NodeList{}
	if err := c.List(ctx, nodes); err != nil {
		if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) {
			return nil, fmt.Errorf("the workload cluster's API server did not answer within %s", w.timeout)
		}
		return nil, fmt.Errorf("listing the workload cluster's Nodes: %w", err)
	}
	return nodes.Items, nil
}

func (w *workloadClients) client(cluster client.ObjectKey, secret *corev1.Secret) (client.Client, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if wc, ok := w.clients[cluster]; ok && wc.secretVersion == secret.ResourceVersion {
		return wc.client, nil
	}
	data := secret.Data[workload.KubeconfigDataKey]
	if len(data) == 0 {
		return nil, fmt.Errorf("Secret %s/%s has no %q key", secret.Namespace, secret.Name, workload.KubeconfigDataKey)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(data)
	if err != nil {
		return nil, fmt.Errorf("the kubeconfig in Secret %s/%s does not parse: %w", secret.Namespace, secret.Name, err)
	}
	cfg.Timeout = w.timeout
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return nil, fmt.Errorf("a client for the workload cluster: %w", err)
	}
	w.clients[cluster] = workloadClient{secretVersion: secret.ResourceVersion, client: c}
	return c, nil
}
