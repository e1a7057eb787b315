package manager

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

// Capstan's controllers read a cluster's Secrets (its certificates, its
// kubeconfig, its machines' bootstrap data) on nearly every reconcile. Read
// from the API server, that was some seventy quorum reads per cluster while
// it came up; cached, it is none. The cache holds only the Secrets labelled
// with a cluster name, which every Secret Capstan writes carries and which
// Cluster API asks of user-supplied certificates, so the manager neither
// holds nor watches the rest of a management cluster's Secrets. A Secret the
// cache does not have (unlabelled, or created a moment ago) is read from the
// API server, so no read ever misses what exists.

// secretCache is the cache configuration for Secrets.
func secretCache() (cache.ByObject, error) {
	req, err := labels.NewRequirement(clusterv1.ClusterNameLabel, selection.Exists, nil)
	if err != nil {
		return cache.ByObject{}, err
	}
	return cache.ByObject{Label: labels.NewSelector().Add(*req)}, nil
}

// newClient is the manager's client: controller-runtime's cached client,
// whose Secret reads fall back to the API server on a cache miss.
func newClient(cfg *rest.Config, opts client.Options) (client.Client, error) {
	cached, err := client.New(cfg, opts)
	if err != nil {
		return nil, err
	}
	live, err := client.New(cfg, client.Options{Scheme: opts.Scheme, Mapper: opts.Mapper, HTTPClient: opts.HTTPClient})
	if err != nil {
		return nil, err
	}
	return &secretFallback{Client: cached, live: live}, nil
}

type secretFallback struct {
	client.Client
	live client.Reader
}

func (c *secretFallback) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	err := c.Client.Get(ctx, key, obj, opts...)
	if _, isSecret := obj.(*corev1.Secret); isSecret && apierrors.IsNotFound(err) {
		return c.live.Get(ctx, key, obj, opts...)
	}
	return err
}
