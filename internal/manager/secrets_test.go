package manager

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/scheme"
	"capstan.dev/capstan/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

// The manager caches only a cluster's labelled Secrets, and its client
// still reads every Secret that exists: an unlabelled one, or one created a
// moment ago, from the API server.
func TestSecretsAreCachedByClusterLabelAndNeverMissed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns := env.Namespace(t)
	secrets, err := secretCache()
	if err != nil {
		t.Fatal(err)
	}
	c, err := cache.New(env.Config, cache.Options{Scheme: scheme.New(), ByObject: map[client.Object]cache.ByObject{&corev1.Secret{}: secrets}})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = c.Start(ctx) }()
	cl, err := newClient(env.Config, client.Options{Scheme: scheme.New(), Cache: &client.CacheOptions{Reader: c}})
	if err != nil {
		t.Fatal(err)
	}
	// Reading a Secret through the client starts the Secret informer.
	if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "warm-up"}, &corev1.Secret{}); err == nil {
		t.Fatal("found a Secret that does not exist")
	}
	labelled := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c1-ca", Labels: map[string]string{clusterv1.ClusterNameLabel: "c1"}}}
	unlabelled := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "someone-elses"}}
	for _, s := range []*corev1.Secret{labelled, unlabelled} {
		if err := env.Client.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
		// At once, before any cache could have it.
		if err := cl.Get(ctx, client.ObjectKeyFromObject(s), &corev1.Secret{}); err != nil {
			t.Errorf("reading %s right after its creation: %v", s.Name, err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for c.Get(ctx, client.ObjectKeyFromObject(labelled), &corev1.Secret{}) != nil {
		if time.Now().After(deadline) {
			t.Fatal("the labelled Secret never reached the cache")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(unlabelled), &corev1.Secret{}); err == nil {
		t.Error("the cache holds a Secret without a cluster-name label")
	}
	if err := cl.Get(ctx, client.ObjectKeyFromObject(unlabelled), &corev1.Secret{}); err != nil {
		t.Errorf("reading the unlabelled Secret: %v", err)
	}
}
