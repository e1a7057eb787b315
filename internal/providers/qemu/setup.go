package qemu

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	qemuv1 "capstan.dev/capstan/api/infrastructure/qemu/v1beta2"
	"capstan.dev/capstan/internal/kit"
	"capstan.dev/capstan/internal/patch"
	"capstan.dev/capstan/internal/providers/local"
	"capstan.dev/capstan/internal/providers/qemu/image"
	"capstan.dev/capstan/internal/providers/qemu/vm"
)

// Options configure the QEMU provider.
type Options struct {
	// Dir is the root directory of the provider's VMs
	// (<Dir>/<namespace>/<name>), load balancers and image cache.
	Dir string
	// ImageCacheDir holds built guest images; empty means <Dir>/_images.
	ImageCacheDir string
	// Binary is the capstan binary started as `node lb`; empty means the
	// running executable.
	Binary string
	// MaxConcurrentReconciles per controller; 0 means 10.
	MaxConcurrentReconciles int
	// BuildImage provides the node image of a Kubernetes version; nil
	// means image.EnsureNode. Tests replace it to drive a build's progress
	// and outcome.
	BuildImage func(ctx context.Context, o image.NodeOptions) (image.Image, error)
}

// Controller names, as they appear in logs and metrics.
const (
	QEMUClusterController = "qemucluster"
	QEMUMachineController = "qemumachine"
)

// vmStopGrace is how long a deleted machine's guest gets to power off
// before QEMU is ended. It is short: the machine is gone either way, and
// the wait holds a reconcile worker.
const vmStopGrace = 10 * time.Second

// Setup registers the QEMUCluster and QEMUMachine controllers with mgr.
// It needs neither QEMU nor the guest image: what is missing shows in the
// machines' conditions when one is created.
func Setup(ctx context.Context, mgr ctrl.Manager, o Options) error {
	if o.Dir == "" {
		return errors.New("qemu provider: Options.Dir is empty: give the root directory for QEMU machines (capstan manager --qemu-dir)")
	}
	root, err := filepath.Abs(o.Dir)
	if err != nil {
		return fmt.Errorf("qemu provider: directory %s: %w", o.Dir, err)
	}
	if err := os.MkdirAll(root, 0o700); err != nil {
		return fmt.Errorf("qemu provider: creating %s: %w", root, err)
	}
	binary := o.Binary
	if binary == "" {
		if binary, err = os.Executable(); err != nil {
			return fmt.Errorf("qemu provider: no capstan binary: %w", err)
		}
	}
	l := layout{root: root}
	cacheDir := l.images()
	if o.ImageCacheDir != "" {
		if cacheDir, err = filepath.Abs(o.ImageCacheDir); err != nil {
			return fmt.Errorf("qemu provider: image cache %s: %w", o.ImageCacheDir, err)
		}
	}
	ensure := o.BuildImage
	if ensure == nil {
		ensure = image.EnsureNode
	}
	// A host without QEMU or the image tools still runs the manager (the
	// provider is on in every capstan up); say so once here, and each
	// machine created says it again in its conditions.
	if missing := image.MissingTools(append(slices.Clone(vm.Tools), image.BuildTools...)...); len(missing) > 0 {
		mgr.GetLogger().Info("QEMU machines cannot start on this host: programs missing", "missing", missing)
	}
	n := newNotifier(ctx, mgr.GetLogger().WithName("qemu-notifier"))
	opts := kit.ProviderOptions(o.MaxConcurrentReconciles)
	lbs := local.NewLBProcess(binary)
	clusters := &clusterReconciler{client: mgr.GetClient(), layout: l, lbs: lbs, notify: n}
	err = kit.SetupInfraCluster(mgr, kit.InfraController{Name: QEMUClusterController, Options: opts, Wake: n.clusters},
		&kit.Reconciler[*qemuv1.QEMUCluster, *clusterScope]{
			Client:    mgr.GetClient(),
			NewObject: func() *qemuv1.QEMUCluster { return &qemuv1.QEMUCluster{} },
			Options:   []patch.Option{ownedConditions},
			Scope:     clusters.scope,
			Run:       clusters.run,
		})
	if err != nil {
		return err
	}
	machines := &machineReconciler{
		client: mgr.GetClient(), layout: l, notify: n, hosts: &hostReservations{},
		images: &images{
			ctx: ctx, log: mgr.GetLogger().WithName("qemu-image"), ensure: ensure, wake: n.machine,
			options: image.NodeOptions{CacheDir: cacheDir},
		},
	}
	return kit.SetupInfraMachine(mgr, kit.InfraController{Name: QEMUMachineController, Options: opts, Wake: n.machines, Peers: machines.workersWaitingFor},
		&qemuv1.QEMUCluster{}, func() client.ObjectList { return &qemuv1.QEMUMachineList{} },
		&kit.Reconciler[*qemuv1.QEMUMachine, *machineScope]{
			Client:    mgr.GetClient(),
			NewObject: func() *qemuv1.QEMUMachine { return &qemuv1.QEMUMachine{} },
			Options:   []patch.Option{ownedConditions},
			Scope:     machines.scope,
			Run:       machines.run,
		})
}

func isQEMURef(ref clusterv1.ContractVersionedObjectReference, kind string) bool {
	return ref.Kind == kind && ref.APIGroup == qemuv1.GroupVersion.Group && ref.Name != ""
}

// ownedConditions makes status writes server-side applies of the
// provider's own conditions (no other controller writes them), so that a
// status computed from a slightly stale read applies without a conflict.
var ownedConditions = patch.OwnedConditions("capstan-qemu-provider",
	qemuv1.ReadyCondition, qemuv1.LoadBalancerReadyCondition, qemuv1.VMProvisionedCondition, qemuv1.BootstrapSucceededCondition,
	clusterv1.PausedCondition)
