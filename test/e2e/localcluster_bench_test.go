package e2e

import (
	"context"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	localv1 "capstan.dev/capstan/api/infrastructure/local/v1beta2"
)

// BenchmarkLocalCluster measures what a user of the local provider waits
// for and what its machines cost: the time from applying a cluster to all
// its nodes Ready (`capstan up --cluster` against a running plane), and the
// resident memory of each control-plane and worker machine once Ready.
//
//	make build && CAPSTAN_BIN=$PWD/bin/capstan go test ./test/e2e -run '^$' -bench LocalCluster -benchtime 1x
func BenchmarkLocalCluster(b *testing.B) {
	for _, size := range []struct{ controlPlanes, workers int }{{1, 2}, {3, 3}} {
		b.Run(strconv.Itoa(size.controlPlanes)+"+"+strconv.Itoa(size.workers), func(b *testing.B) {
			var ready time.Duration
			var cpRSS, workerRSS float64
			for i := 0; i < b.N; i++ {
				p := newPlane(b)
				p.up()
				start := time.Now()
				out, code := capstan(b, "up", "--state-dir", p.dir, "--cluster", "bench",
					"--control-plane-machine-count", strconv.Itoa(size.controlPlanes),
					"--worker-machine-count", strconv.Itoa(size.workers), "--cluster-timeout", "4m")
				if code != 0 {
					b.Fatalf("creating the cluster: exit %d\n%s", code, out)
				}
				ready += time.Since(start)
				cp, w := machineMemory(b, p.client())
				cpRSS += cp
				workerRSS += w
				deleteCluster(b, p.client(), "bench")
				p.down()
			}
			n := float64(b.N)
			b.ReportMetric(ready.Seconds()/n, "s-to-ready")
			b.ReportMetric(cpRSS/n, "MiB/cp-machine")
			b.ReportMetric(workerRSS/n, "MiB/worker")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// machineMemory is the mean resident memory of the control-plane and of
// the worker machines' processes, in MiB.
func machineMemory(b *testing.B, c client.Client) (controlPlane, worker float64) {
	b.Helper()
	list := &localv1.LocalMachineList{}
	if err := c.List(context.Background(), list); err != nil {
		b.Fatal(err)
	}
	var cpSum, wSum float64
	var cpN, wN int
	for _, lm := range list.Items {
		rss, _ := memoryOf(b, int(lm.Status.Process.PID))
		if _, ok := lm.Labels[clusterv1.MachineControlPlaneLabel]; ok {
			cpSum, cpN = cpSum+rss, cpN+1
		} else {
			wSum, wN = wSum+rss, wN+1
		}
	}
	return cpSum / float64(max(cpN, 1)), wSum / float64(max(wN, 1))
}

func deleteCluster(b *testing.B, c client.Client, name string) {
	b.Helper()
	ctx := context.Background()
	if err := c.Delete(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}}); err != nil {
		b.Fatal(err)
	}
	for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); time.Sleep(time.Second) {
		list := &localv1.LocalMachineList{}
		if err := c.List(ctx, list); err == nil && len(list.Items) == 0 {
			return
		}
	}
	b.Fatal("the cluster was not deleted within 3 minutes")
}
