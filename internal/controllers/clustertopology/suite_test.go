package clustertopology_test

import (
	"context"
	"sync"
	"testing"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/contract"
	clustercontroller "capstan.dev/capstan/internal/controllers/cluster"
	"capstan.dev/capstan/internal/controllers/clustertopology"
	"capstan.dev/capstan/internal/testenv"
	"capstan.dev/capstan/internal/topology/desired"
	fx "capstan.dev/capstan/test/fixture"
	"capstan.dev/capstan/test/provider"
)

var env *testenv.Env

// states holds, per Cluster ("namespace/name"), the function that builds
// the desired state the test wants applied: most tests hand the applier
// states they build themselves, from the test provider's kinds. A Cluster
// without one is computed by desired.Compute from its class, as in the
// manager.
var states sync.Map

// computed counts the computations per Cluster, so that a test knows a
// reconcile happened.
var computed sync.Map

func clusterKey(c *clusterv1.Cluster) string { return c.Namespace + "/" + c.Name }

func testCompute(in desired.Input) (*desired.State, error) {
	key := clusterKey(in.Cluster)
	n, _ := computed.LoadOrStore(key, new(counter))
	n.(*counter).add()
	build, ok := states.Load(key)
	if !ok {
		return desired.Compute(in)
	}
	return build.(func(desired.Input) *desired.State)(in), nil
}

type counter struct {
	mu sync.Mutex
	n  int
}

func (c *counter) add() { c.mu.Lock(); c.n++; c.mu.Unlock() }
func (c *counter) get() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

func computations(c *clusterv1.Cluster) int {
	n, ok := computed.Load(clusterKey(c))
	if !ok {
		return 0
	}
	return n.(*counter).get()
}

// TestMain starts a management plane and a manager running the topology
// controller with the Cluster controller (which claims the topology's
// infrastructure cluster and control plane and deletes a Cluster's
// descendants): no MachineDeployment, MachineSet or provider controller
// runs, so the objects the topology makes stay as it wrote them.
func TestMain(m *testing.M) {
	fx.MainWithManager(m, &env, func(ctx context.Context, mgr ctrl.Manager) error {
		if err := provider.Install(ctx, env.Client); err != nil {
			return err
		}
		resolver := &contract.Resolver{Reader: mgr.GetClient()}
		topology := &clustertopology.Reconciler{
			Client:   mgr.GetClient(),
			Resolver: resolver,
			Recorder: mgr.GetEventRecorder("clustertopology-controller"),
			Compute:  testCompute,
		}
		if err := topology.SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: 4}); err != nil {
			return err
		}
		clusters := &clustercontroller.Reconciler{Client: mgr.GetClient(), Resolver: resolver}
		return clusters.SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: 4})
	})
}

func get(t *testing.T, obj client.Object) {
	t.Helper()
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
		t.Fatal(err)
	}
}
