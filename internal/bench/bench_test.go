package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"google.golang.org/grpc/grpclog"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/scheme"
	"capstan.dev/capstan/internal/testenv"
)

// The guard holds the controllers to ceilings of API writes per Machine,
// every write the API server counted (the benchmark's own creates
// included), for clusters brought up with no simulated delays. The aim is
// 25, because API writes are what a small management machine runs out of
// first (docs/architecture.md): clusters of one control-plane machine and
// five workers are held to it (measured 21.1). A cluster's fixed cost (its
// own objects, its Secrets, the writes of its Cluster, control plane and
// deployment: some 40) weighs on each Machine the more the fewer Machines
// share it; with a single worker the floor of what the Cluster API
// contract makes any implementation write is near 28 per Machine, and
// those clusters are held to their own ceiling (measured 32.8; 37.0 before
// the first report of an object was paced, 48-50 when the guard was
// written). Lower the ceilings as writes come down, never raise them.
var writeCeilings = []struct {
	workers int
	ceiling float64
}{
	{workers: 5, ceiling: 25},
	{workers: 1, ceiling: 37},
}

// TestScaleWritesPerMachine is the regression guard of the scale
// benchmark: ten clusters of one control-plane machine and each shape's
// workers, created at once with no simulated delays, must reach Running
// within the shape's ceiling of API writes per Machine and with few
// conflicts. It counts; it does not time. While the run is held
// (Config.Hold, after the count), its clusters are reachable through the
// kubeconfig it reports.
func TestScaleWritesPerMachine(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a management plane and 10 simulated clusters")
	}
	ctrl.SetLogger(logr.Discard())
	grpclog.SetLoggerV2(grpclog.NewLoggerV2(io.Discard, io.Discard, io.Discard))
	bin := binary(t)
	for _, shape := range writeCeilings {
		t.Run(fmt.Sprintf("1+%d", shape.workers), func(t *testing.T) {
			held := 0
			res := runLogged(t, Config{Clusters: 10, Workers: shape.workers, NoDelays: true, Binary: bin, Timeout: 3 * time.Minute,
				Hold: func(ctx context.Context, res *Result) error {
					held = clustersThrough(ctx, t, res.Kubeconfig, res.Namespace)
					return nil
				}})
			if held != 10 {
				t.Errorf("while the run was held, its kubeconfig showed %d Clusters in namespace %s, want its 10", held, res.Namespace)
			}
			if res.WritesPerMachine > shape.ceiling {
				t.Errorf("%.1f API writes per Machine, want at most %.0f: find the controller that writes more than it must in the table above", res.WritesPerMachine, shape.ceiling)
			}
			if res.ConflictPercent > 5 {
				t.Errorf("%.1f%% of writes were refused with 409 Conflict, want under 5%%", res.ConflictPercent)
			}
			if res.KeysPerCluster > keysPerCluster {
				t.Errorf("%.1f private keys generated per cluster, want at most %d: %s", res.KeysPerCluster, keysPerCluster, keysWhy)
			}
		})
	}
}

// keysPerCluster is what a cluster needs: its three certificate
// authorities, the service-account key and the admin kubeconfig's key, and
// the control-plane controller's etcd client certificate, which is reused
// for half its hour.
const keysPerCluster = 6

const keysWhy = "a controller generates a key it does not need (one per CA, the service-account key, the admin kubeconfig and one cached etcd client certificate)"

// topologyExtraWrites is how many more API writes per Machine a cluster
// made from a ClusterClass may cost than the same cluster written out by
// hand: the topology controller's applies of the objects and its patches of
// the Cluster, spread over the Machines.
const topologyExtraWrites = 3

// TestTopologyWritesPerMachine holds managed topologies to their budget:
// ten clusters of one control-plane machine and one worker made from one
// ClusterClass may cost at most topologyExtraWrites more API writes per
// Machine than the same clusters written out by hand, measured side by
// side.
func TestTopologyWritesPerMachine(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a management plane and 20 simulated clusters")
	}
	ctrl.SetLogger(logr.Discard())
	grpclog.SetLoggerV2(grpclog.NewLoggerV2(io.Discard, io.Discard, io.Discard))
	bin := binary(t)
	// How many status writes a cluster takes depends on how many of its
	// intermediate states its controllers happen to see, which varies with
	// the machine's load from run to run; the writes a topology adds do
	// not. When the first side-by-side pair is over budget, a second pair
	// is measured and each kind keeps its lower figure.
	perMachine := map[bool]float64{}
	for pair := 1; pair <= 2; pair++ {
		for _, topology := range []bool{false, true} {
			res := runLogged(t, Config{Clusters: 10, Workers: 1, NoDelays: true, Binary: bin, Timeout: 3 * time.Minute, Topology: topology})
			if got, ok := perMachine[topology]; !ok || res.WritesPerMachine < got {
				perMachine[topology] = res.WritesPerMachine
			}
		}
		extra := perMachine[true] - perMachine[false]
		t.Logf("pair %d: a topology cluster costs %.1f API writes per Machine more than the same cluster by hand (%.1f against %.1f)", pair, extra, perMachine[true], perMachine[false])
		if extra <= topologyExtraWrites {
			return
		}
	}
	t.Errorf("a topology cluster costs %.1f API writes per Machine more than the same cluster by hand (%.1f against %.1f) in the better of two pairs of runs, want at most %d: see the topology runs' tables",
		perMachine[true]-perMachine[false], perMachine[true], perMachine[false], topologyExtraWrites)
}

// binary is the capstan binary the benchmark's planes run, removed after
// the test when it was built for it.
func binary(t *testing.T) string {
	bin, removeBinary, err := testenv.Binary()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(removeBinary)
	return bin
}

// clustersThrough counts the Clusters in ns through a kubeconfig file.
func clustersThrough(ctx context.Context, t *testing.T, kubeconfig, ns string) int {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatalf("the held run's kubeconfig %q: %v", kubeconfig, err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	list := &clusterv1.ClusterList{}
	if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
		t.Fatalf("listing the held run's Clusters: %v", err)
	}
	return len(list.Items)
}

// runLogged runs the benchmark, logs its table and fails the test when it
// fails.
func runLogged(t *testing.T, cfg Config) *Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	res, err := Run(ctx, cfg)
	if res != nil {
		var b bytes.Buffer
		res.Table(&b)
		t.Log("\n" + b.String())
	}
	if err != nil {
		t.Fatal(err)
	}
	return res
}
