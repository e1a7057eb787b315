package local

import (
	"os"
	"path/filepath"
)

// layout names the directories of one cluster under the provider's root.
type layout struct{ root string }

func (l layout) cluster(namespace, cluster string) string {
	return filepath.Join(l.root, namespace, cluster)
}

func (l layout) lb(namespace, cluster string) string {
	return filepath.Join(l.cluster(namespace, cluster), "lb")
}

func (l layout) machines(namespace, cluster string) string {
	return filepath.Join(l.cluster(namespace, cluster), "machines")
}

func (l layout) machine(namespace, cluster, name string) string {
	return filepath.Join(l.machines(namespace, cluster), name)
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
