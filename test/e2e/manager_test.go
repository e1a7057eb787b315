package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/test/fixture"
)

func freePort(t *testing.T) int { return fixture.FreePort(t) }

func httpGet(url string) (int, string) {
	res, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(body)
}

// `capstan manager` runs the controllers against a cluster it is pointed
// at, serves health and metrics, elects a leader, and honours
// --watch-filter.
func TestManagerCommand(t *testing.T) {
	probePort, metricsPort := freePort(t), freePort(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := exec.CommandContext(ctx, env.Binary, "manager",
		"--kubeconfig", filepath.Join(env.StateDir, "kubeconfig"),
		"--health-probe-bind-address", "127.0.0.1:"+strconv.Itoa(probePort),
		"--metrics-bind-address", "127.0.0.1:"+strconv.Itoa(metricsPort),
		"--leader-elect", "--leader-election-namespace", "default",
		"--watch-filter", "team-a",
		"--concurrency", "cluster=2,machine=3")
	var logs strings.Builder
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = cmd.Wait() }()

	fixture.Eventually(t, "manager ready", time.Minute, func(context.Context) string {
		code, _ := httpGet(fmt.Sprintf("http://127.0.0.1:%d/readyz", probePort))
		return fixture.Unless(code == http.StatusOK, "")
	})

	ns := env.Namespace(t)
	createCluster := func(name string, labels map[string]string) *clusterv1.Cluster {
		c := fixture.NewCluster(ns, name, func(c *clusterv1.Cluster) {
			c.Labels = labels
			c.Spec.InfrastructureRef = clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.example.com", Kind: "Nothing", Name: name}
		})
		fixture.Create(t, env.Client, c)
		return c
	}
	mine := createCluster("mine", map[string]string{"cluster.x-k8s.io/watch-filter": "team-a"})
	theirs := createCluster("theirs", map[string]string{"cluster.x-k8s.io/watch-filter": "team-b"})
	fixture.Eventually(t, "the manager reconciles its Cluster", time.Minute, func(ctx context.Context) string {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(mine), mine)
		return fixture.Unless(err == nil && slices.Contains(mine.Finalizers, clusterv1.ClusterFinalizer), "")
	})
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(theirs), theirs); err != nil {
		t.Fatal(err)
	}
	if len(theirs.Finalizers) != 0 || len(theirs.Status.Conditions) != 0 {
		t.Errorf("the manager touched a Cluster outside its --watch-filter: %+v", theirs.ObjectMeta)
	}

	code, body := httpGet(fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort))
	if code != http.StatusOK || !strings.Contains(body, `controller_runtime_reconcile_total{controller="cluster"`) {
		t.Errorf("metrics (%d) lack the cluster controller's reconcile counter:\n%.500s", code, body)
	}
	fixture.Eventually(t, "leader lease", 30*time.Second, func(ctx context.Context) string {
		lease := &metav1.PartialObjectMetadata{}
		lease.SetGroupVersionKind(leaseGVK)
		return fixture.Unless(env.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "capstan-manager"}, lease) == nil, "")
	})
	if t.Failed() {
		t.Logf("manager output:\n%s", logs.String())
	}
}

var leaseGVK = coordinationv1.SchemeGroupVersion.WithKind("Lease")
