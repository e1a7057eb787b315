package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	localv1 "capstan.dev/capstan/api/infrastructure/local/v1beta2"
	"capstan.dev/capstan/internal/kit"
	"capstan.dev/capstan/internal/patch"
	"capstan.dev/capstan/internal/providers/local/machinedir"
	"capstan.dev/capstan/internal/providers/pool"
)

// Options configure the local provider.
type Options struct {
	// Dir is the root directory of local machines and load balancers
	// (<Dir>/<namespace>/<cluster>/...).
	Dir string
	// Binary is the capstan binary started as `node run` and `node lb`;
	// empty means the running executable.
	Binary string
	// MaxConcurrentReconciles per controller; 0 means 10.
	MaxConcurrentReconciles int
}

// Controller names, as they appear in logs and metrics.
const (
	LocalClusterController = "localcluster"
	LocalMachineController = "localmachine"
)

// Grace periods between SIGTERM and SIGKILL.
const (
	lbStopGrace      = 10 * time.Second
	machineStopGrace = 30 * time.Second
)

// Setup registers the LocalCluster, LocalMachine and LocalMachinePool
// controllers, and the notifier that wakes them when processes change, with mgr.
func Setup(ctx context.Context, mgr ctrl.Manager, o Options) error {
	if o.Dir == "" {
		return errors.New("local provider: Options.Dir is empty: give the root directory for local machines (capstan manager --local-dir)")
	}
	root, err := filepath.Abs(o.Dir)
	if err != nil {
		return fmt.Errorf("local provider: directory %s: %w", o.Dir, err)
	}
	if err := machinedir.PrivateDir(root); err != nil {
		return fmt.Errorf("local provider: creating %s: %w", root, err)
	}
	binary := o.Binary
	if binary == "" {
		if binary, err = os.Executable(); err != nil {
			return fmt.Errorf("local provider: no capstan binary to start machines with: %w", err)
		}
	}
	n, err := newNotifier(mgr.GetLogger().WithName("local-notifier"))
	if err != nil {
		return fmt.Errorf("local provider: watching machine directories: %w", err)
	}
	if err := mgr.Add(n); err != nil {
		return err
	}
	l := layout{root: root}
	opts := kit.ProviderOptions(o.MaxConcurrentReconciles)
	clusters := &clusterReconciler{
		client: mgr.GetClient(), layout: l, lbs: NewLBProcess(binary), notify: n,
		stopper: newStopper(lbStopGrace),
	}
	err = kit.SetupInfraCluster(mgr, kit.InfraController{Name: LocalClusterController, Options: opts, Wake: n.clusters},
		&kit.Reconciler[*localv1.LocalCluster, *clusterScope]{
			Client:    mgr.GetClient(),
			NewObject: func() *localv1.LocalCluster { return &localv1.LocalCluster{} },
			Options:   []patch.Option{ownedConditions},
			Scope:     clusters.scope,
			Run:       clusters.run,
		})
	if err != nil {
		return err
	}
	machines := &machineReconciler{
		client: mgr.GetClient(), layout: l, binary: binary, notify: n,
		stopper: newStopper(machineStopGrace), starts: map[types.NamespacedName]start{},
	}
	err = kit.SetupInfraMachine(mgr, kit.InfraController{Name: LocalMachineController, Options: opts, Wake: n.machines},
		&localv1.LocalCluster{}, func() client.ObjectList { return &localv1.LocalMachineList{} },
		&kit.Reconciler[*localv1.LocalMachine, *machineScope]{
			Client:    mgr.GetClient(),
			NewObject: func() *localv1.LocalMachine { return &localv1.LocalMachine{} },
			Options:   []patch.Option{ownedConditions},
			Scope:     machines.scope,
			Run:       machines.run,
		})
	if err != nil {
		return err
	}
	pools := &poolReconciler{client: mgr.GetClient()}
	return pool.SetupController(mgr, LocalMachinePoolController, opts, &localv1.LocalMachine{},
		&kit.Reconciler[*localv1.LocalMachinePool, *poolScope]{
			Client:    mgr.GetClient(),
			NewObject: func() *localv1.LocalMachinePool { return &localv1.LocalMachinePool{} },
			Options:   []patch.Option{ownedConditions},
			Scope:     pools.scope,
			Run:       pools.run,
		})
}

func isLocalRef(ref clusterv1.ContractVersionedObjectReference, kind string) bool {
	return ref.Kind == kind && ref.APIGroup == localv1.GroupVersion.Group && ref.Name != ""
}

// ownedConditions makes status writes server-side applies of the
// provider's own conditions: no other controller writes them, so a status
// computed from a slightly stale cached read still applies instead of
// failing with a conflict.
var ownedConditions = patch.OwnedConditions("capstan-local-provider",
	localv1.ReadyCondition, localv1.LoadBalancerReadyCondition, localv1.ProcessRunningCondition,
	localv1.BootstrapSucceededCondition, clusterv1.PausedCondition)

// start remembers when this manager started a process, to tell one that
// has not taken its lock yet from one that died.
type start struct {
	pid int
	at  time.Time
}
