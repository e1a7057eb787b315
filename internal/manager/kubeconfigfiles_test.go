package manager_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"capstan.dev/capstan/internal/manager"
	"capstan.dev/capstan/test/fixture"
)

// A Cluster's kubeconfig file in the state directory goes with the Cluster
// when the manager sees it deleted. A Cluster removed while paused (as
// `capstan move` removes the source's copy) keeps its file: the cluster
// lives on elsewhere; so does the file of a Cluster that went while no
// manager ran. Other files stay.
func TestDeletedClustersLoseTheirKubeconfigFile(t *testing.T) {
	env := manager.Plane()
	ctx := context.Background()
	ns := env.Namespace(t)
	dir := t.TempDir()
	write := func(path string) string {
		if err := os.WriteFile(path, []byte("a kubeconfig"), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	exists := func(path string) bool {
		_, err := os.Stat(path)
		return !errors.Is(err, os.ErrNotExist)
	}
	kept := fixture.NewCluster(ns, "kubeconfig-kept", fixture.Paused(false))
	doomed := fixture.NewCluster(ns, "kubeconfig-doomed", fixture.Paused(false))
	moved := fixture.NewCluster(ns, "kubeconfig-moved", fixture.Paused(true))
	fixture.Create(t, env.Client, kept, doomed, moved)
	keptFile := write(manager.ClusterKubeconfigPath(dir, kept.Name))
	doomedFile := write(manager.ClusterKubeconfigPath(dir, doomed.Name))
	staleFile := write(manager.ClusterKubeconfigPath(dir, "long-gone"))
	movedFile := write(manager.ClusterKubeconfigPath(dir, moved.Name))
	other := write(filepath.Join(dir, "notes.txt"))

	startManager(t, manager.Options{MetricsAddr: "0", ProbeAddr: "0", ClusterKubeconfigDir: dir})
	// The manager watches once its controllers run: the Cluster controller
	// has put its finalizer on the doomed Cluster.
	fixture.Eventually(t, "the manager running", time.Minute, func(ctx context.Context) string {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(doomed), doomed); err != nil {
			return err.Error()
		}
		return fixture.Unless(slices.Contains(doomed.Finalizers, clusterv1.ClusterFinalizer), "no finalizer on the Cluster yet")
	})
	if err := env.Client.Delete(ctx, moved); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(ctx, doomed); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, "the deleted Cluster's file is removed", 2*time.Minute, func(ctx context.Context) string {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(doomed), doomed); err == nil {
			return "the Cluster still exists"
		}
		return fixture.Unless(!exists(doomedFile), doomedFile+" is still there")
	})
	fixture.Eventually(t, "the paused Cluster gone", 2*time.Minute, func(ctx context.Context) string {
		return fixture.Unless(env.Client.Get(ctx, client.ObjectKeyFromObject(moved), moved) != nil, "the paused Cluster still exists")
	})
	for _, path := range []string{keptFile, other, staleFile, movedFile} {
		if !exists(path) {
			t.Errorf("%s was removed", path)
		}
	}
}
