package install

import (
	"context"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"capstan.dev/capstan/internal/deploy"
	"capstan.dev/capstan/internal/inventory"
)

// Providers is what an installation made from o runs, as clusterctl's
// inventory records it: the core and kubeadm providers always, the local
// provider when the manager is given a machine directory.
func Providers(o deploy.Options, version string) inventory.Installed {
	return inventory.Installed{Namespace: deploy.Namespace, Version: version, Local: o.LocalDir != ""}
}

// RecordProviders brings clusterctl's inventory in line with the
// installation made from o (see inventory.Ensure): init and upgrade apply
// call it right after applying the objects, so the inventory is written even
// when waiting for the manager later times out. It writes nothing when the
// inventory already matches.
func RecordProviders(ctx context.Context, c client.Client, o deploy.Options, version string, timeout time.Duration) (inventory.Result, error) {
	return inventory.Ensure(ctx, c, Providers(o, version), timeout)
}
