package manager

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/pause"
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
// Cluster is deleted, so that no credentials of a deleted cluster stay on
// disk. A Cluster that goes while paused is not deleted but moved
// elsewhere (`capstan move` pauses, then removes the source's copy): its
// cluster lives on, and so does its file. For that reason nothing is swept
// at start either: a file whose Cluster went while no manager watched may
// be a moved cluster's. Files carry the Cluster's name only: a file stays
// while a Cluster of that name remains in any namespace. It reads the cache
// and writes nothing to the API.
type kubeconfigFiles struct {
	client client.Reader
	dir    string
}

func setupKubeconfigFiles(mgr ctrl.Manager, dir string) error {
	r := &kubeconfigFiles{client: mgr.GetClient(), dir: dir}
	deletedNotMoved := predicate.Funcs{
		CreateFunc: func(event.CreateEvent) bool { return false },
		UpdateFunc: func(event.UpdateEvent) bool { return false },
		DeleteFunc: func(e event.DeleteEvent) bool {
			c, ok := e.Object.(*clusterv1.Cluster)
			if !ok {
				return false
			}
			paused, _ := pause.Check(c, c)
			return !paused
		},
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
	return ctrl.NewControllerManagedBy(mgr).Named("clusterkubeconfigfile").
		For(&clusterv1.Cluster{}, builder.WithPredicates(deletedNotMoved)).
		Complete(r)
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
