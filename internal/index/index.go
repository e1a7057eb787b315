package index

import (
	"context"
	"fmt"
	"reflect"
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

// ClusterName indexes objects by the name of the Cluster they belong to:
// spec.clusterName where the kind has one, else the cluster-name label.
const ClusterName = "capstan.dev/cluster-name"

// registered remembers which kinds each cache indexes already: several
// controllers of one manager list the same kind by cluster, and a cache
// refuses a second index of the same name.
var (
	mu         sync.Mutex
	registered = map[registration]bool{}
)

type registration struct {
	indexer client.FieldIndexer
	kind    reflect.Type
}

// ByClusterName makes the cache of indexer index each of objs' kinds by
// ClusterName; a kind indexed already is left as it is.
func ByClusterName(ctx context.Context, indexer client.FieldIndexer, objs ...client.Object) error {
	mu.Lock()
	defer mu.Unlock()
	for _, obj := range objs {
		key := registration{indexer: indexer, kind: reflect.TypeOf(obj)}
		if registered[key] {
			continue
		}
		if err := indexer.IndexField(ctx, obj, ClusterName, clusterNameOf); err != nil {
			return fmt.Errorf("indexing %T by cluster name: %w", obj, err)
		}
		registered[key] = true
	}
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
