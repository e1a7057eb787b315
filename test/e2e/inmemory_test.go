package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/conditions"
	"capstan.dev/capstan/test/fixture"
)

// simulatedClusters is how many clusters the README says a laptop
// simulates with the in-memory provider.
const simulatedClusters = 100

// The README's in-memory walk-through: `capstan up` runs the in-memory
// provider, `generate cluster --infrastructure in-memory` writes a cluster
// of simulated machines, a hundred of them become Available, describe and
// get kubeconfig work on them as on real ones, and deleting them leaves
// nothing.
func TestHundredSimulatedClusters(t *testing.T) {
	t.Parallel()
	p := newPlane(t)
	p.up()
	c := p.client()
	ctx := context.Background()

	config := filepath.Join(t.TempDir(), "capstan.yaml")
	if err := os.WriteFile(config, []byte("MACHINE_BOOT_DELAY: 1s\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	// The README's shell loop, four clusters at a time.
	var wg sync.WaitGroup
	names := make(chan string)
	for range 4 {
		wg.Go(func() {
			for name := range names {
				out, code := capstan(t, "generate", "cluster", name, "--infrastructure", "in-memory", "--worker-machine-count", "1", "--config", config)
				if code != 0 {
					t.Errorf("generate cluster %s exited %d:\n%s", name, code, out)
					continue
				}
				if err := apply(c, out); err != nil {
					t.Error(err)
				}
			}
		})
	}
	for i := range simulatedClusters {
		names <- fmt.Sprintf("sim-%d", i)
	}
	close(names)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	fixture.Eventually(t, "every simulated cluster Available", 5*time.Minute, func(ctx context.Context) string {
		list := &clusterv1.ClusterList{}
		if err := c.List(ctx, list, client.InNamespace("default")); err != nil {
			return err.Error()
		}
		available, last := 0, ""
		for i := range list.Items {
			if conditions.IsTrue(&list.Items[i], clusterv1.AvailableCondition) {
				available++
			} else if cond := conditions.Get(&list.Items[i], clusterv1.AvailableCondition); cond != nil {
				last = list.Items[i].Name + ": " + cond.Message
			}
		}
		return fixture.Unless(available == simulatedClusters, fmt.Sprintf("%d of %d Available (%s)", available, simulatedClusters, last))
	})
	t.Logf("%d simulated clusters Available %s after the first was applied", simulatedClusters, time.Since(started).Round(time.Second))

	out, code := capstan(t, "describe", "cluster", "sim-7", "--kubeconfig", filepath.Join(p.dir, "kubeconfig"))
	if code != 0 || !strings.Contains(out, "InMemoryCluster/sim-7") || !strings.Contains(out, "MachineDeployment/sim-7-md-0") {
		t.Errorf("describe cluster sim-7 exited %d:\n%s", code, out)
	}
	kubeconfig, code := capstan(t, "get", "kubeconfig", "sim-7", "--kubeconfig", filepath.Join(p.dir, "kubeconfig"))
	if code != 0 {
		t.Fatalf("get kubeconfig sim-7 exited %d:\n%s", code, kubeconfig)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig([]byte(kubeconfig))
	if err != nil {
		t.Fatal(err)
	}
	workload, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	nodes := &corev1.NodeList{}
	if err := workload.List(ctx, nodes); err != nil || len(nodes.Items) != 2 {
		t.Errorf("nodes of sim-7 through its kubeconfig: %d, %v; want the control plane's and the worker's", len(nodes.Items), err)
	}

	for i := range simulatedClusters {
		cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("sim-%d", i)}}
		if err := c.Delete(ctx, cluster); err != nil {
			t.Fatal(err)
		}
	}
	fixture.Eventually(t, "every simulated cluster deleted with its machines", 5*time.Minute, func(ctx context.Context) string {
		clusters, machines := &clusterv1.ClusterList{}, &clusterv1.MachineList{}
		if err := c.List(ctx, clusters); err != nil {
			return err.Error()
		}
		if err := c.List(ctx, machines); err != nil {
			return err.Error()
		}
		return fixture.Unless(len(clusters.Items)+len(machines.Items) == 0,
			fmt.Sprintf("%d Clusters and %d Machines left", len(clusters.Items), len(machines.Items)))
	})
}

// apply creates every object of a multi-document manifest, as `kubectl
// create -f` would.
func apply(c client.Client, manifest string) error {
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(manifest), 4096)
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if len(obj.Object) == 0 {
			continue
		}
		if err := c.Create(context.Background(), obj); err != nil {
			return fmt.Errorf("creating %s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
	}
}
