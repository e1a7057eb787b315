package console

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	controlplanev1 "capstan.dev/capstan/api/controlplane/kubeadm/v1beta2"
	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	inmemoryv1 "capstan.dev/capstan/api/infrastructure/inmemory/v1beta2"
	"capstan.dev/capstan/test/fixture"
)

// fleetSize is the fleet the console is measured with.
const fleetSize = 1000

var fleetOnce sync.Once

// createFleet creates fleetSize Clusters, each with a KubeadmControlPlane
// and a MachineDeployment and a status that says something, in one
// namespace of the package's plane; once per test binary.
func createFleet(b *testing.B) {
	fleetOnce.Do(func() {
		ctx := context.Background()
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "console-fleet"}}
		fixture.Create(b, env.Client, ns)
		jobs := make(chan int)
		errs := make(chan error, fleetSize)
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range jobs {
					errs <- createFleetCluster(ctx, ns.Name, fmt.Sprintf("c%04d", i))
				}
			}()
		}
		for i := range fleetSize {
			jobs <- i
		}
		close(jobs)
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				b.Fatal(err)
			}
		}
	})
}

func createFleetCluster(ctx context.Context, ns, name string) error {
	inCluster := map[string]string{clusterv1.ClusterNameLabel: name}
	kcp := &controlplanev1.KubeadmControlPlane{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-cp", Labels: inCluster},
		Spec: controlplanev1.KubeadmControlPlaneSpec{Replicas: ptr.To[int32](3), Version: "v1.35.0",
			MachineTemplate: controlplanev1.KubeadmControlPlaneMachineTemplate{Spec: controlplanev1.KubeadmControlPlaneMachineTemplateSpec{
				InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: inmemoryv1.GroupVersion.Group, Kind: "InMemoryMachineTemplate", Name: "cp"}}}}}
	cluster := fixture.NewCluster(ns, name, fixture.ControlPlane(kcp))
	cluster.Labels = map[string]string{"env": "bench", "region": fmt.Sprintf("r%d", len(name)%3)}
	mdLabels := map[string]string{clusterv1.ClusterNameLabel: name, clusterv1.MachineDeploymentNameLabel: name + "-md"}
	md := &clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-md", Labels: mdLabels},
		Spec: clusterv1.MachineDeploymentSpec{ClusterName: name, Replicas: ptr.To[int32](5),
			Selector: metav1.LabelSelector{MatchLabels: mdLabels},
			Template: clusterv1.MachineTemplateSpec{ObjectMeta: clusterv1.ObjectMeta{Labels: mdLabels}, Spec: clusterv1.MachineSpec{
				ClusterName: name, Version: "v1.35.0", Bootstrap: clusterv1.Bootstrap{DataSecretName: ptr.To("none")},
				InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: inmemoryv1.GroupVersion.Group, Kind: "InMemoryMachineTemplate", Name: "md"}}}}}
	if err := env.Client.Create(ctx, kcp); err != nil {
		return err
	}
	if err := env.Client.Create(ctx, cluster); err != nil {
		return err
	}
	if err := env.Client.Create(ctx, md); err != nil {
		return err
	}
	now := metav1.Now()
	cluster.Status.Phase = string(clusterv1.ClusterPhaseProvisioned)
	cluster.Status.ControlPlane = &clusterv1.ClusterControlPlaneStatus{DesiredReplicas: ptr.To[int32](3), ReadyReplicas: ptr.To[int32](3), UpToDateReplicas: ptr.To[int32](3),
		Versions: []clusterv1.StatusVersion{{Version: "v1.35.0", Replicas: 3}}}
	cluster.Status.Workers = &clusterv1.WorkersStatus{DesiredReplicas: ptr.To[int32](5), ReadyReplicas: ptr.To[int32](4), UpToDateReplicas: ptr.To[int32](5)}
	cluster.Status.Conditions = []metav1.Condition{
		{Type: clusterv1.AvailableCondition, Status: metav1.ConditionTrue, Reason: "Available", LastTransitionTime: now},
		{Type: clusterv1.InfrastructureReadyCondition, Status: metav1.ConditionTrue, Reason: "Ready", LastTransitionTime: now},
		{Type: clusterv1.ClusterControlPlaneAvailableCondition, Status: metav1.ConditionTrue, Reason: "Available", LastTransitionTime: now},
		{Type: clusterv1.ClusterWorkersAvailableCondition, Status: metav1.ConditionTrue, Reason: "Available", LastTransitionTime: now},
		{Type: clusterv1.ClusterWorkerMachinesReadyCondition, Status: metav1.ConditionFalse, Reason: "NotReady", Message: "Machine " + name + "-md-x: NodeHealthy: kubelet is not ready", LastTransitionTime: now},
		{Type: clusterv1.PausedCondition, Status: metav1.ConditionFalse, Reason: "NotPaused", LastTransitionTime: now},
		{Type: clusterv1.DeletingCondition, Status: metav1.ConditionFalse, Reason: "NotDeleting", LastTransitionTime: now},
		{Type: clusterv1.RollingOutCondition, Status: metav1.ConditionFalse, Reason: "NotRollingOut", LastTransitionTime: now},
	}
	return env.Client.Status().Update(ctx, cluster)
}

// BenchmarkFleet measures /api/clusters for a fleet of 1,000 Clusters: the
// time of one response, its size, and the heap the console holds once its
// cache has them (in the test process, which holds little else).
func BenchmarkFleet(b *testing.B) {
	createFleet(b)
	before := heapInUse()
	_, browser := startConsole(b, Options{Config: env.Config})
	client, base, jar := browser.http, browser.base, browser.http.Jar

	get := func() []byte {
		resp, err := client.Get(base + "/api/clusters")
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("/api/clusters: %d %v", resp.StatusCode, err)
		}
		return body
	}
	// The first answer waits for the cache to fill.
	var body []byte
	fixture.Eventually(b, "the console's cache holds the fleet", time.Minute, func(context.Context) string {
		body = get()
		var fleet struct {
			Clusters []ClusterSummary `json:"clusters"`
		}
		if err := json.Unmarshal(body, &fleet); err != nil {
			return err.Error()
		}
		n := 0
		for _, c := range fleet.Clusters {
			if c.Namespace == "console-fleet" {
				n++
			}
		}
		return fixture.Unless(n == fleetSize, fmt.Sprintf("%d of %d clusters", n, fleetSize))
	})
	after := heapInUse()

	for b.Loop() {
		body = get()
	}
	b.StopTimer()
	// What a browser downloads: it asks for gzip.
	req, _ := http.NewRequest(http.MethodGet, base+"/api/clusters", nil)
	req.Header.Set("Accept-Encoding", "gzip")
	raw := &http.Client{Jar: jar, Transport: &http.Transport{DisableCompression: true}}
	resp, err := raw.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	wire, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.Header.Get("Content-Encoding") != "gzip" {
		b.Errorf("/api/clusters for a browser that takes gzip: Content-Encoding %q", resp.Header.Get("Content-Encoding"))
	}
	b.ReportMetric(float64(len(wire)), "gzip-bytes/response")
	b.ReportMetric(float64(len(body)), "bytes/response")
	b.ReportMetric(float64(after)/(1<<20), "MiB-heap")
	b.ReportMetric(float64(after-before)/(1<<20), "MiB-heap-added")
	b.Logf("%d clusters: /api/clusters %d bytes (%d gzipped) in %s; heap in use %.1f MiB (%.1f MiB more than before the console started)",
		fleetSize, len(body), len(wire), b.Elapsed()/time.Duration(max(b.N, 1)), float64(after)/(1<<20), float64(after-before)/(1<<20))
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}
