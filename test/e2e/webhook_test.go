package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	fx "capstan.dev/capstan/test/fixture"
)

// topologyCluster is a Cluster of class with one MachineDeployment.
func topologyCluster(ns, name, class string, vars ...clusterv1.ClusterVariable) *clusterv1.Cluster {
	c := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	c.Spec.Topology.ClassRef.Name = class
	c.Spec.Topology.Version = "v1.33.1"
	c.Spec.Topology.Workers.MachineDeployments = []clusterv1.MachineDeploymentTopology{{Name: "md-0", Class: "default-worker"}}
	c.Spec.Topology.Variables = vars
	return c
}

// capstan up reports the plane ready only once the admission webhooks
// serve (their failure policy refuses topology Clusters until then), after
// a restart too, when the configurations still name the previous port.
func TestUpServesWebhooksBeforeItIsReady(t *testing.T) {
	t.Parallel()
	p := newPlane(t)
	p.up()
	c := p.client()
	ctx := context.Background()

	// At once, no waiting: the mutating webhook answers (a version without
	// its "v" passes the schema only once it has added it; the class does
	// not exist yet, which is no refusal).
	early := topologyCluster("default", "early", "quick-start")
	early.Spec.Topology.Version = "1.33.1"
	if err := c.Create(ctx, early); err != nil {
		t.Fatalf("a topology Cluster right after capstan up: %v\nlog:\n%s", err, tail(p.log(), 30))
	}

	cc, templates := fx.QuickStartClass(t, "default")
	for _, o := range templates {
		fx.Create(t, c, o)
	}
	fx.Create(t, c, cc)
	fx.Eventually(t, "class reconciled by capstan up's manager", time.Minute, func(ctx context.Context) string {
		if err := c.Get(ctx, client.ObjectKeyFromObject(cc), cc); err != nil {
			return err.Error()
		}
		return fx.Condition(cc.Status.Conditions, clusterv1.ClusterClassVariablesReadyCondition, metav1.ConditionTrue)
	})
	err := c.Create(ctx, topologyCluster("default", "too-verbose", "quick-start",
		clusterv1.ClusterVariable{Name: "kubeletLogLevel", Value: apiextensionsv1.JSON{Raw: []byte(`11`)}}))
	if err == nil || !strings.Contains(err.Error(), `admission webhook "default.cluster.capstan.dev" denied the request`) ||
		!strings.Contains(err.Error(), `variable "kubeletLogLevel"`) {
		t.Fatalf("a bad variable through capstan up's webhook: %v", err)
	}

	p.down()
	p.up()
	c = p.client()
	// The configurations named the previous process's port until the new
	// one served.
	restarted := topologyCluster("default", "after-restart", "quick-start")
	restarted.Spec.Topology.Version = "1.33.1"
	if err := c.Create(ctx, restarted); err != nil {
		t.Fatalf("a topology Cluster right after capstan up again: %v\nlog:\n%s", err, tail(p.log(), 30))
	}
}
