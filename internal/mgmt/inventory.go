package mgmt

import (
	"context"
	"fmt"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"capstan.dev/capstan/internal/inventory"
	"capstan.dev/capstan/internal/scheme"
)

// recordInventory writes the plane's providers into clusterctl's inventory
// (see internal/inventory). It runs on every start, after the CRDs: an
// unchanged inventory costs one list and no write, and a new binary's start
// brings the recorded versions up to date.
func recordInventory(ctx context.Context, cfg *rest.Config, in inventory.Installed) error {
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return err
	}
	res, err := inventory.Ensure(ctx, c, in, 30*time.Second)
	if err != nil {
		return fmt.Errorf("recording Capstan's providers in clusterctl's inventory: %w", err)
	}
	if res.Changed() {
		klog.InfoS("Recorded providers in clusterctl's inventory", "namespace", in.Namespace,
			"version", inventory.Version(in.Version), "created", res.Created, "updated", res.Updated, "deleted", res.Deleted)
	}
	return nil
}
