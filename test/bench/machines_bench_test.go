package bench

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	scalebench "capstan.dev/capstan/internal/bench"
	"capstan.dev/capstan/internal/manager"
	"capstan.dev/capstan/internal/testenv"
	"capstan.dev/capstan/test/fixture"
	"capstan.dev/capstan/test/provider"
)

// BenchmarkMachineDeploymentToRunning creates one Cluster with a
// MachineDeployment of 20 Machines on the test provider and reports, from
// create to every Machine Running: API requests and writes per Machine
// (from the API server's metrics), 409 conflicts, reconciles per Machine,
// and the requests that dominate.
func BenchmarkMachineDeploymentToRunning(b *testing.B) {
	const replicas = 20
	fixture.SetLogger()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	planes, stop, err := fixture.StartPlanes(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer stop()
	mgmt, wl := planes.Mgmt, planes.Workload
	// The benchmark waits through the manager's cache, so that waiting
	// adds no API requests to the count.
	mgr, err := manager.New(mgmt.Config, manager.Options{MetricsAddr: "0", ProbeAddr: "0"})
	if err != nil {
		b.Fatal(err)
	}
	if err := (&provider.Provisioner{Client: mgr.GetClient(), Workload: wl.Client}).SetupWithManager(mgr); err != nil {
		b.Fatal(err)
	}
	go func() { _ = mgr.Start(ctx) }()

	for i := 0; i < b.N; i++ {
		ns := fmt.Sprintf("bench-%d-%d", time.Now().UnixNano(), i)
		if err := mgmt.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			b.Fatal(err)
		}
		beforeRequests, err := scalebench.ScrapeRequests(ctx, mgmt.Config)
		if err != nil {
			b.Fatal(err)
		}
		beforeReconciles, err := reconciles()
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		createCluster(b, ctx, mgmt, wl, ns, replicas)
		// The manager's cache answers, so waiting adds no API requests.
		waitRunning(b, ctx, mgr.GetClient(), ns, replicas)
		elapsed := time.Since(start)
		// Let the last status writes land before counting.
		time.Sleep(2 * time.Second)

		afterRequests, err := scalebench.ScrapeRequests(ctx, mgmt.Config)
		if err != nil {
			b.Fatal(err)
		}
		afterReconciles, err := reconciles()
		if err != nil {
			b.Fatal(err)
		}
		d := afterRequests.Minus(beforeRequests)
		var rec []string
		var totalRec float64
		for name, v := range afterReconciles {
			n := v - beforeReconciles[name]
			totalRec += n
			rec = append(rec, fmt.Sprintf("%s=%.1f", name, n/replicas))
		}
		sort.Strings(rec)
		b.ReportMetric(elapsed.Seconds(), "s-to-running")
		b.ReportMetric(d.Total()/replicas, "requests/machine")
		b.ReportMetric(d.Writes()/replicas, "writes/machine")
		b.ReportMetric(d.Conflicts, "conflicts")
		b.ReportMetric(totalRec/replicas, "reconciles/machine")
		b.ReportMetric(0, "ns/op")
		b.Logf("reconciles per machine: %s", strings.Join(rec, " "))
		b.Logf("requests that dominate: %s", strings.Join(top(d, 12), " "))
	}
}

func createCluster(b *testing.B, ctx context.Context, mgmt, wl *testenv.Env, ns string, replicas int32) {
	b.Helper()
	md := fixture.Workers(ns, "bench", replicas)
	md.Spec.Selector = metav1.LabelSelector{MatchLabels: map[string]string{"pool": "workers"}}
	md.Spec.Template.Labels = map[string]string{"pool": "workers"}
	fixture.CreateProviderCluster(b, mgmt, wl, ns, "bench", md, true)
}

func waitRunning(b *testing.B, ctx context.Context, c client.Client, ns string, replicas int) {
	b.Helper()
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		machines := &clusterv1.MachineList{}
		if err := c.List(ctx, machines, client.InNamespace(ns)); err != nil {
			return false, nil
		}
		running := 0
		for _, m := range machines.Items {
			if m.Status.Phase == string(clusterv1.MachinePhaseRunning) {
				running++
			}
		}
		return running == replicas, nil
	})
	if err != nil {
		b.Fatalf("machines not all Running: %v", err)
	}
}
