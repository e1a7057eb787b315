package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/test/fixture"
)

// TestPivot is the self-hosting flow on one machine: a workload cluster
// created from the embedded plane gets Capstan installed (`capstan init`,
// its manager a real process on the worker), takes its own objects
// (`capstan move --to-kubeconfig`), and then manages itself: the first
// plane goes down, and scaling the workers through the workload cluster's
// own API adds a Ready node, with no machine restarted on the way.
func TestPivot(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a workload cluster")
	}
	ctx := context.Background()
	p := newPlane(t)
	workload := installCapstanInto(t, p, "self")
	localDir := filepath.Join(p.dir, "local")
	pids := movePIDs(t, localDir)
	if len(pids) != 3 {
		t.Fatalf("want 2 machines and a load balancer running, found %v", pids)
	}
	managers := installedManagerPids(p)
	if len(managers) != 1 {
		t.Fatalf("manager processes %v, want one", managers)
	}
	before := moveInventory(t, p.client(), "self")

	out, code := capstan(t, "move", "--kubeconfig", filepath.Join(p.dir, "kubeconfig"), "--to-kubeconfig", workload)
	t.Logf("capstan move:\n%s", out)
	if code != 0 {
		t.Fatalf("capstan move --to-kubeconfig exited %d", code)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", workload)
	if err != nil {
		t.Fatal(err)
	}
	self, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	if got := moveInventory(t, p.client(), "self"); len(got) != 0 {
		t.Errorf("left on the first plane: %v", got)
	}
	if got := moveInventory(t, self, "self"); !equalInventory(got, before) {
		t.Errorf("the workload cluster holds %v, want %v", got, before)
	}
	expectSamePIDs(t, localDir, pids)

	p.down()
	t.Cleanup(func() {
		if t.Failed() {
			var logs []string
			_ = filepath.WalkDir(localDir, func(path string, d os.DirEntry, err error) error {
				if err == nil && d.Name() == "manager.log" {
					logs = append(logs, path)
				}
				return nil
			})
			for _, l := range logs {
				b, _ := os.ReadFile(l)
				t.Logf("%s:\n%s", l, tail(string(b), 60))
			}
		}
	})
	waitUnpausedAndAvailable(t, self, "self")

	md := &clusterv1.MachineDeployment{}
	md.Namespace, md.Name = "default", "self-md-0"
	if err := self.Patch(ctx, md, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"replicas":2}}`))); err != nil {
		t.Fatal(err)
	}
	waitReadyNodes(t, kubernetes.NewForConfigOrDie(cfg), 3, 3*time.Minute)
	machines := &clusterv1.MachineList{}
	fixture.Eventually(t, "3 Machines Running with Nodes", time.Minute, func(context.Context) string {
		if err := self.List(ctx, machines, client.InNamespace("default")); err != nil {
			return err.Error()
		}
		var states []string
		running := 0
		for _, m := range machines.Items {
			if m.Status.Phase == "Running" && m.Status.NodeRef.IsDefined() {
				running++
			}
			states = append(states, m.Name+"="+m.Status.Phase)
		}
		if running != 3 || len(machines.Items) != 3 {
			return strings.Join(states, ", ")
		}
		return ""
	})
	expectSamePIDs(t, localDir, pids)
	if got := installedManagerPids(p); len(got) != 1 || got[0] != managers[0] {
		t.Errorf("manager processes %v, want the one that took the cluster over (%d)", got, managers[0])
	}
}
