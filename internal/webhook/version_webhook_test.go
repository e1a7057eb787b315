package webhook_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	fx "capstan.dev/capstan/test/fixture"
	"capstan.dev/capstan/test/provider"
)

// warnings records the warnings the API server returns.
type warnings struct {
	mu   sync.Mutex
	seen []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen = append(w.seen, text)
}

// take returns the warnings seen since the last take.
func (w *warnings) take() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := strings.Join(w.seen, "\n")
	w.seen = nil
	return out
}

// warningClient is a client whose warnings w records.
func warningClient(t *testing.T) (client.Client, *warnings) {
	t.Helper()
	w := &warnings{}
	cfg := rest.CopyConfig(env.Config)
	cfg.WarningHandler = w
	c, err := client.New(cfg, client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c, w
}

// TestVersionChangeWaitsForThePreviousUpgrade: a new topology version is
// refused while the control plane or a worker is not at the previous one
// yet, admitted once everything is; the unsafe annotations turn the checks
// off with a warning. The Cluster is paused, so that the test plays the
// controllers: it makes the control plane (the test provider's, whose status
// it sets) and the MachineDeployment the topology would have made.
func TestVersionChangeWaitsForThePreviousUpgrade(t *testing.T) {
	ctx := context.Background()
	if err := provider.Install(ctx, env.Client); err != nil {
		t.Fatal(err)
	}
	ns := env.Namespace(t)
	readyClass(t, ns, nil)
	wc, seen := warningClient(t)
	updateWith := func(change func(*clusterv1.Cluster)) error {
		return updateVia(t, wc, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "up"}}, change)
	}
	setVersion := func(v string) func(*clusterv1.Cluster) {
		return func(c *clusterv1.Cluster) { c.Spec.Topology.Version = v }
	}

	cp := provider.ControlPlane.New(ns, "up-cp", map[string]any{"version": "v1.33.1"})
	fx.Create(t, env.Client, cp)
	c := topologyCluster(ns, "up")
	c.Spec.Paused = ptr.To(true)
	c.Spec.ControlPlaneRef = provider.ControlPlane.Ref(cp.GetName())
	fx.Create(t, env.Client, c)

	// The control plane reports no version yet: it is making its first Machines.
	refused(t, updateWith(setVersion("v1.34.2")), "validation.cluster.capstan.dev",
		`spec.topology.version: Invalid value: "v1.34.2": cannot be changed while the upgrade to v1.33.1 is under way`,
		"the control plane (TestControlPlane up-cp) is still making its first Machines",
		clusterv1.ClusterTopologyUnsafeUpdateVersionAnnotation)
	if err := provider.SetStatus(ctx, env.Client, cp, map[string]any{"version": "v1.33.1"}); err != nil {
		t.Fatal(err)
	}

	// A MachineDeployment of the topology still at an older version.
	md := &clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "up-md-0", Labels: map[string]string{
		clusterv1.ClusterNameLabel: "up", clusterv1.ClusterTopologyOwnedLabel: "", clusterv1.ClusterTopologyMachineDeploymentNameLabel: "md-0",
	}}}
	md.Spec.ClusterName = "up"
	md.Spec.Replicas = ptr.To(int32(0))
	md.Spec.Selector.MatchLabels = map[string]string{"md": "up-md-0"}
	md.Spec.Template.Labels = map[string]string{"md": "up-md-0"}
	md.Spec.Template.Spec.ClusterName = "up"
	md.Spec.Template.Spec.Version = "v1.32.4"
	md.Spec.Template.Spec.Bootstrap.DataSecretName = ptr.To("up-md-0")
	md.Spec.Template.Spec.InfrastructureRef = provider.InfraMachineTemplate.Ref("up-md-0")
	fx.Create(t, env.Client, md)
	fx.Eventually(t, "the MachineDeployment behind holds the upgrade back", timeout, func(context.Context) string {
		err := updateWith(setVersion("v1.34.2"))
		if err == nil {
			t.Fatal("an upgrade was admitted while a MachineDeployment is at v1.32.4")
		}
		return fx.Unless(strings.Contains(err.Error(), "MachineDeployment(s) up-md-0 are not all at v1.33.1 yet"), err.Error())
	})
	if err := update(t, md, func(md *clusterv1.MachineDeployment) { md.Spec.Template.Spec.Version = "v1.33.1" }); err != nil {
		t.Fatal(err)
	}

	// Everything at v1.33.1: one minor up is admitted.
	fx.Eventually(t, "the upgrade admitted", timeout, func(context.Context) string {
		if err := updateWith(setVersion("v1.34.2")); err != nil {
			return "refused: " + err.Error()
		}
		return ""
	})
	if w := seen.take(); w != "" {
		t.Errorf("an admitted upgrade came with warnings: %s", w)
	}

	// Nothing moved to v1.34.2 (the test plays the controllers): the next
	// version waits, whatever it is.
	refused(t, updateWith(setVersion("v1.34.3")), "validation.cluster.capstan.dev",
		"the control plane (TestControlPlane up-cp) is at v1.33.1, not yet at v1.34.2",
		"MachineDeployment(s) up-md-0 are not all at v1.34.2 yet")

	// The unsafe annotation turns every version check off, with a warning.
	annotate := func(key string) func(*clusterv1.Cluster) {
		return func(c *clusterv1.Cluster) {
			if c.Annotations == nil {
				c.Annotations = map[string]string{}
			}
			c.Annotations[key] = ""
		}
	}
	if err := updateWith(annotate(clusterv1.ClusterTopologyUnsafeUpdateVersionAnnotation)); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"v1.34.3", "v1.33.9"} { // under way, then lowered
		if err := updateWith(setVersion(v)); err != nil {
			t.Errorf("%s with the unsafe version annotation: %v", v, err)
		}
		if w := seen.take(); !strings.Contains(w, "annotation "+clusterv1.ClusterTopologyUnsafeUpdateVersionAnnotation+" is set") {
			t.Errorf("no warning about the unsafe annotation for %s: %q", v, w)
		}
	}

	// A topology added to a Cluster made without one: refused, unless the
	// unsafe class-name annotation says to, with a warning.
	plain := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "adopted"}}
	plain.Spec.Paused = ptr.To(true)
	plain.Spec.InfrastructureRef = provider.InfraCluster.Ref("adopted")
	fx.Create(t, env.Client, plain)
	addTopology := func(c *clusterv1.Cluster) { c.Spec.Topology = topologyCluster(ns, "x").Spec.Topology }
	refused(t, update(t, plain, addTopology), "validation.cluster.capstan.dev",
		"spec.topology.classRef: Forbidden", clusterv1.ClusterTopologyUnsafeUpdateClassNameAnnotation)
	seen.take()
	if err := updateVia(t, wc, plain, func(c *clusterv1.Cluster) {
		c.Annotations = map[string]string{clusterv1.ClusterTopologyUnsafeUpdateClassNameAnnotation: ""}
		addTopology(c)
	}); err != nil {
		t.Errorf("adding a topology with the unsafe class-name annotation: %v", err)
	}
	if w := seen.take(); !strings.Contains(w, "annotation "+clusterv1.ClusterTopologyUnsafeUpdateClassNameAnnotation+" is set") {
		t.Errorf("no warning about the unsafe class-name annotation: %q", w)
	}
}
