package manager_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"capstan.dev/capstan/internal/manager"
	"capstan.dev/capstan/test/fixture"
)

// A Cluster's kubeconfig file in the state directory goes with the Cluster:
// at once when the manager sees the deletion, at the next start when the
// Cluster went while no manager ran. Other files stay.
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
	fixture.Create(t, env.Client, kept, doomed)
	keptFile := write(manager.ClusterKubeconfigPath(dir, kept.Name))
	doomedFile := write(manager.ClusterKubeconfigPath(dir, doomed.Name))
	staleFile := write(manager.ClusterKubeconfigPath(dir, "long-gone"))
	other := write(filepath.Join(dir, "notes.txt"))

	startManager(t, manager.Options{MetricsAddr: "0", ProbeAddr: "0", ClusterKubeconfigDir: dir})
	fixture.Eventually(t, "the file of a Cluster deleted before the start is removed", time.Minute, func(context.Context) string {
		return fixture.Unless(!exists(staleFile), staleFile+" is still there")
	})
	if err := env.Client.Delete(ctx, doomed); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, "the deleted Cluster's file is removed", 2*time.Minute, func(ctx context.Context) string {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(doomed), doomed); err == nil {
			return "the Cluster still exists"
		}
		return fixture.Unless(!exists(doomedFile), doomedFile+" is still there")
	})
	for _, path := range []string{keptFile, other} {
		if !exists(path) {
			t.Errorf("%s was removed", path)
		}
	}
}
