package qemu

import (
	"os"
	"path/filepath"
)

// layout names the provider's directories under its root. Machines are
// <root>/<namespace>/<name>; the load balancers and the image cache live
// under names no namespace can have (a namespace is a DNS label, without
// underscores), so that nothing collides.
type layout struct{ root string }

func (l layout) machine(namespace, name string) string {
	return filepath.Join(l.root, namespace, name)
}

func (l layout) lb(namespace, cluster string) string {
	return filepath.Join(l.root, "_lb", namespace, cluster)
}

// backends holds one <machine>/apiserver-endpoint file per control-plane
// machine of the cluster: the load balancer's backends.
func (l layout) backends(namespace, cluster string) string {
	return filepath.Join(l.lb(namespace, cluster), "backends")
}

func (l layout) images() string { return filepath.Join(l.root, "_images") }

// startedMarker is the file the provider leaves in a machine's directory
// right before it starts the VM: a VM is started once, and a restarted
// manager must tell "never started" from "started and died" even when the
// status write that recorded the start was lost.
const startedMarker = "provider-started"

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
