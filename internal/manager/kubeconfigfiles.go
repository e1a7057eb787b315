package manager

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	crmanager "sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

// kubeconfigFileSuffix ends the name of a workload cluster's kubeconfig
// file that `capstan up --cluster` leaves in the state directory.
const kubeconfigFileSuffix = ".kubeconfig"

// ClusterKubeconfigPath is where `capstan up --cluster` keeps the admin
// kubeconfig of the Cluster name, in a manager's ClusterKubeconfigDir.
func ClusterKubeconfigPath(dir, name string) string {
	return filepath.Join(dir, name+kubeconfigFileSuffix)
}

// kubeconfigFiles removes a Cluster's kubeconfig file from dir once the
// Cluster is gone, so that no credentials of a deleted cluster stay on disk.
// Files carry the Cluster's name only: a file stays while a Cluster of that
// name remains in any namespace. It reads the cache and writes nothing to
// the API.
type kubeconfigFiles struct {
	client client.Reader
	dir    string
}

func setupKubeconfigFiles(mgr ctrl.Manager, dir string) error {
	r := &kubeconfigFiles{client: mgr.GetClient(), dir: dir}
	// Only deletions matter; a Cluster deleted while no manager ran is
	// found by the sweep at start.
	onlyDeletes := predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		UpdateFunc:  func(event.UpdateEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
	if err := ctrl.NewControllerManagedBy(mgr).Named("clusterkubeconfigfile").
		For(&clusterv1.Cluster{}, builder.WithPredicates(onlyDeletes)).
		Complete(r); err != nil {
		return err
	}
	return mgr.Add(crmanager.RunnableFunc(func(ctx context.Context) error {
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			return nil
		}
		if err := r.sweep(ctx); err != nil {
			mgr.GetLogger().Error(err, "Removing the kubeconfig files of deleted Clusters", "dir", dir)
		}
		return nil
	}))
}

func (r *kubeconfigFiles) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	err := r.client.Get(ctx, req.NamespacedName, &clusterv1.Cluster{})
	if err == nil || !apierrors.IsNotFound(err) {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	names, err := r.clusterNames(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	if names[req.Name] {
		return reconcile.Result{}, nil
	}
	return reconcile.Result{}, r.remove(ctx, req.Name)
}

// sweep removes the files of Clusters that were deleted while no manager
// watched.
func (r *kubeconfigFiles) sweep(ctx context.Context) error {
	entries, err := os.ReadDir(r.dir)
	if err != nil {
		return err
	}
	names, err := r.clusterNames(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), kubeconfigFileSuffix)
		if !ok || name == "" || !e.Type().IsRegular() || names[name] {
			continue
		}
		errs = append(errs, r.remove(ctx, name))
	}
	return errors.Join(errs...)
}

func (r *kubeconfigFiles) clusterNames(ctx context.Context) (map[string]bool, error) {
	list := &clusterv1.ClusterList{}
	if err := r.client.List(ctx, list); err != nil {
		return nil, err
	}
	names := map[string]bool{}
	for _, c := range list.Items {
		names[c.Name] = true
	}
	return names, nil
}

func (r *kubeconfigFiles) remove(ctx context.Context, name string) error {
	path := ClusterKubeconfigPath(r.dir, name)
	err := os.Remove(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("removing the kubeconfig of deleted Cluster %s: %w", name, err)
	}
	ctrl.LoggerFrom(ctx).Info("Removed the kubeconfig file of a deleted Cluster", "cluster", name, "path", path)
	return nil
}
