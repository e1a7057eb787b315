package index

import (
	"context"
	"fmt"
	"reflect"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

// ClusterName indexes objects by the name of the Cluster they belong to:
// spec.clusterName where the kind has one, else the cluster-name label.
const ClusterName = "capstan.dev/cluster-name"

// MachineSetName indexes objects by their machine-set-name label: the
// infrastructure and bootstrap objects a MachineSet cloned.
const MachineSetName = "capstan.dev/machineset-name"

// registered remembers which indexes each cache has already: several
// controllers of one manager list the same kind by cluster, and a cache
// refuses a second index of the same name.
var (
	mu         sync.Mutex
	registered = map[registration]bool{}
)

type registration struct {
	indexer client.FieldIndexer
	field   string
	// kind is the Go type, or the GroupVersionKind of an unstructured
	// object (each has an informer of its own).
	kind string
}

// ByClusterName makes the cache of indexer index each of objs' kinds by
// ClusterName; a kind indexed already is left as it is.
func ByClusterName(ctx context.Context, indexer client.FieldIndexer, objs ...client.Object) error {
	for _, obj := range objs {
		if err := ensure(ctx, indexer, obj, ClusterName, clusterNameOf); err != nil {
			return err
		}
	}
	return nil
}

// ByMachineSetName makes the cache index obj's kind by MachineSetName. A
// cache accepts an index while it runs, so a controller can index a
// provider's kinds when it first meets them.
func ByMachineSetName(ctx context.Context, indexer client.FieldIndexer, obj client.Object) error {
	return ensure(ctx, indexer, obj, MachineSetName, func(o client.Object) []string {
		if v := o.GetLabels()[clusterv1.MachineSetNameLabel]; v != "" {
			return []string{v}
		}
		return nil
	})
}

func ensure(ctx context.Context, indexer client.FieldIndexer, obj client.Object, field string, extract client.IndexerFunc) error {
	kind := reflect.TypeOf(obj).String()
	if u, ok := obj.(*unstructured.Unstructured); ok {
		kind = u.GroupVersionKind().String()
	}
	key := registration{indexer: indexer, field: field, kind: kind}
	mu.Lock()
	defer mu.Unlock()
	if registered[key] {
		return nil
	}
	if err := indexer.IndexField(ctx, obj, field, extract); err != nil {
		return fmt.Errorf("indexing %s by %s: %w", kind, field, err)
	}
	registered[key] = true
	return nil
}

func clusterNameOf(obj client.Object) []string {
	name := ""
	switch o := obj.(type) {
	case *clusterv1.Machine:
		name = o.Spec.ClusterName
	case *clusterv1.MachineSet:
		name = o.Spec.ClusterName
	case *clusterv1.MachineDeployment:
		name = o.Spec.ClusterName
	case *clusterv1.MachinePool:
		name = o.Spec.ClusterName
	default:
		name = obj.GetLabels()[clusterv1.ClusterNameLabel]
	}
	if name == "" {
		return nil
	}
	return []string{name}
}

// InCluster selects the objects of the Cluster namespace/name through the
// index; it needs ByClusterName for the listed kind.
func InCluster(namespace, name string) []client.ListOption {
	return []client.ListOption{client.InNamespace(namespace), client.MatchingFields{ClusterName: name}}
}
