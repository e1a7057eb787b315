package index

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

// ClusterClass indexes Clusters by the ClusterClass their topology is built
// from, as "namespace/name" (the class may live in another namespace).
const ClusterClass = "capstan.dev/clusterclass"

// ByClusterClass makes the cache index Clusters by ClusterClass.
func ByClusterClass(ctx context.Context, indexer client.FieldIndexer) error {
	return ensure(ctx, indexer, &clusterv1.Cluster{}, ClusterClass, func(o client.Object) []string {
		c, ok := o.(*clusterv1.Cluster)
		if !ok {
			return nil
		}
		if key := c.GetClassKey(); key.Name != "" {
			return []string{key.String()}
		}
		return nil
	})
}

// UsingClass selects, through the index, the Clusters built from the class
// namespace/name, in every namespace.
func UsingClass(namespace, name string) client.ListOption {
	return client.MatchingFields{ClusterClass: namespace + "/" + name}
}
