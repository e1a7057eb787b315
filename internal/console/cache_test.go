package console

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/scheme"
)

// A read that comes before the cache has started waits for the start
// rather than failing with "the cache is not started", which the first
// request to a console used to get now and then on a loaded machine.
func TestReadsWaitForTheCacheToStart(t *testing.T) {
	informers, err := cache.New(rest.CopyConfig(env.Config), cache.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := informers.List(ctx, &clusterv1.ClusterList{}); err == nil {
		t.Fatal("the cache answered a list before it was started: this test no longer shows what it means to")
	}
	read := make(chan error, 1)
	go func() {
		read <- startingCache{informers}.Get(ctx, client.ObjectKey{Namespace: "default", Name: "none"}, &clusterv1.Cluster{})
	}()
	time.Sleep(200 * time.Millisecond)
	go func() { _ = informers.Start(ctx) }()
	if err := <-read; !apierrors.IsNotFound(err) {
		t.Fatalf("a Get made before the start answered %v, want the Cluster's NotFound once the cache runs", err)
	}
}
