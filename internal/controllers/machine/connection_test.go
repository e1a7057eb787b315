package machine_test

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/conditions"
	"capstan.dev/capstan/test/fixture"
)

// TestNodeConditionsFollowTheConnection: when the workload cluster stops
// answering, a Running Machine whose Node was healthy does not go on
// reporting it so from what the cluster said last: NodeReady and
// NodeHealthy turn Unknown (ConnectionDown) with the connection error, and
// the Cluster's RemoteConnectionProbe names that error too, not client-go's
// rate limiter. Nothing else about the Machine changes. When the cluster
// answers again the conditions come back within about one probe interval
// (10 s), woken by the cache rather than by polling.
func TestNodeConditionsFollowTheConnection(t *testing.T) {
	ctx := context.Background()
	ns := mgmt.Namespace(t)
	server, err := url.Parse(workloadEnv.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	proxy := fixture.NewProxy(t, server.Host)
	cluster := workloadClusterWith(t, ns, fixture.KubeconfigSecretVia(t, workloadEnv, ns, "w", proxy.URL()))

	providerID := "test://" + ns + "/m1"
	node := readyNode("conn-"+ns, providerID)
	fixture.Create(t, workloadEnv.Client, node)
	t.Cleanup(func() { _ = workloadEnv.Client.Delete(context.Background(), node) })
	setNodeReady(t, node)
	m := runningMachine(t, cluster, "m1", providerID, node.Name, nil, nil)
	key := client.ObjectKeyFromObject(m)
	machineCheck(t, key, func(m *clusterv1.Machine) string {
		return fixture.Condition(m.Status.Conditions, clusterv1.NodeHealthyCondition, metav1.ConditionTrue)
	})

	proxy.Cut()
	cut := time.Now()
	machineCheck(t, key, func(m *clusterv1.Machine) string {
		for _, t := range []string{clusterv1.NodeReadyCondition, clusterv1.NodeHealthyCondition} {
			c := conditions.Get(m, t)
			switch {
			case c == nil || c.Status != metav1.ConditionUnknown || c.Reason != clusterv1.ConnectionDownReason:
				return t + " not Unknown/ConnectionDown yet: " + fmt.Sprintf("%+v", c)
			case !strings.Contains(c.Message, "connection refused") || !strings.Contains(c.Message, proxy.Addr()):
				return t + " message does not name the refused connection: " + c.Message
			}
		}
		return ""
	})
	t.Logf("Node conditions Unknown %s after the cluster went silent", time.Since(cut).Round(time.Second))
	m = &clusterv1.Machine{}
	if err := mgmt.Client.Get(ctx, key, m); err != nil {
		t.Fatal(err)
	}
	if m.Status.Phase != string(clusterv1.MachinePhaseRunning) || !m.DeletionTimestamp.IsZero() || m.Status.NodeRef.Name != node.Name {
		t.Errorf("a lost connection changed the Machine itself: phase %s, deleting %v, nodeRef %q", m.Status.Phase, !m.DeletionTimestamp.IsZero(), m.Status.NodeRef.Name)
	}
	fixture.Eventually(t, "RemoteConnectionProbe names the connection error", 30*time.Second, func(ctx context.Context) string {
		c := &clusterv1.Cluster{}
		if err := mgmt.Client.Get(ctx, client.ObjectKeyFromObject(cluster), c); err != nil {
			return err.Error()
		}
		p := conditions.Get(c, clusterv1.ClusterRemoteConnectionProbeCondition)
		switch {
		case p == nil || p.Status != metav1.ConditionFalse:
			return "RemoteConnectionProbe not False: " + fmt.Sprintf("%+v", p)
		case !strings.Contains(p.Message, "connection refused") || strings.Contains(p.Message, "rate limiter"):
			return "RemoteConnectionProbe message: " + p.Message
		}
		return ""
	})

	proxy.Restore(t)
	back := time.Now()
	machineCheck(t, key, func(m *clusterv1.Machine) string {
		if s := fixture.Condition(m.Status.Conditions, clusterv1.NodeReadyCondition, metav1.ConditionTrue); s != "" {
			return s
		}
		return fixture.Condition(m.Status.Conditions, clusterv1.NodeHealthyCondition, metav1.ConditionTrue)
	})
	if d := time.Since(back); d > 20*time.Second {
		t.Errorf("Node conditions came back %s after the cluster answered again, want within about one probe interval (10s)", d.Round(time.Second))
	}
	t.Logf("Node conditions True again %s after the cluster answered", time.Since(back).Round(time.Second))
}
