package kubeadmcontrolplane_test

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	controlplanev1 "capstan.dev/capstan/api/controlplane/kubeadm/v1beta2"
	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/conditions"
	"capstan.dev/capstan/test/fixture"
)

// TestHealthConditionsFollowTheConnection: when the manager cannot reach
// the workload cluster, the control plane's health conditions say so —
// Unknown, "cannot reach …" with the connection error — instead of counts
// made up from nothing ("0 healthy etcd members of 0") or from what the
// cluster said last; when it answers again they report what they read.
func TestHealthConditionsFollowTheConnection(t *testing.T) {
	ns := planes.Mgmt.Namespace(t)
	ctx := context.Background()
	c := planes.Mgmt.Client
	server, err := url.Parse(planes.Workload.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	proxy := fixture.NewProxy(t, server.Host)
	createClusterWith(t, ns, 1, fixture.KubeconfigSecretVia(t, planes.Workload, ns, "c", proxy.URL()))

	// kubeadm init's ConfigMap says the cluster is initialized; the
	// workload plane is shared, so it goes again with the test.
	initDone := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kubeadm-config"}}
	if err := planes.Workload.Client.Create(ctx, initDone); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = planes.Workload.Client.Delete(context.Background(), initDone) })
	var first clusterv1.Machine
	fixture.Eventually(t, "the first Machine's Node", time.Minute, func(context.Context) string {
		ms := controlPlaneMachines(t, ns)
		if len(ms) != 1 {
			return fmt.Sprintf("%d Machines", len(ms))
		}
		first = ms[0]
		return fixture.Unless(first.Status.NodeRef.Name != "", "no nodeRef")
	})
	runKubelet(t, first.Status.NodeRef.Name, etcdClientAddr(t))

	// Read through the proxy: etcd answers (its only member is the plane's,
	// which belongs to no Machine) and the components are healthy.
	healthy := func(context.Context) string {
		kcp := getKCP(t, ns)
		if !ptr.Deref(kcp.Status.Initialization.ControlPlaneInitialized, false) {
			return "not initialized: " + conditionMessage(kcp, controlplanev1.KubeadmControlPlaneInitializedCondition)
		}
		if msg := conditionMessage(kcp, controlplanev1.KubeadmControlPlaneEtcdClusterHealthyCondition); !strings.Contains(msg, "member capstan belongs to no Machine") {
			return "EtcdClusterHealthy " + msg
		}
		if msg := conditionMessage(kcp, controlplanev1.KubeadmControlPlaneControlPlaneComponentsHealthyCondition); !strings.HasPrefix(msg, "True") {
			return "ControlPlaneComponentsHealthy " + msg
		}
		return ""
	}
	fixture.Eventually(t, "etcd and the components read", time.Minute, healthy)

	proxy.Cut()
	// The manager's health probe of the workload cluster (every 10 s, at
	// most 5 s each, 3 failures in a row: workload's defaults) takes up to
	// about 45 s to call the connection down; a loaded CI run once needed
	// more than the 30 s this waited before.
	fixture.Eventually(t, "health conditions say the cluster cannot be reached", 90*time.Second, func(context.Context) string {
		kcp := getKCP(t, ns)
		for _, typ := range []string{controlplanev1.KubeadmControlPlaneEtcdClusterHealthyCondition, controlplanev1.KubeadmControlPlaneControlPlaneComponentsHealthyCondition, controlplanev1.KubeadmControlPlaneAvailableCondition} {
			cond := conditions.Get(kcp, typ)
			switch {
			case cond == nil || cond.Status != metav1.ConditionUnknown:
				return fmt.Sprintf("%s not Unknown: %+v", typ, cond)
			case !strings.HasPrefix(cond.Message, "cannot reach the workload cluster: ") || !strings.Contains(cond.Message, "connection refused"):
				return typ + " message: " + cond.Message
			case strings.Contains(cond.Message, "healthy etcd members of"):
				return typ + " invents counts: " + cond.Message
			}
		}
		if r := conditions.Get(kcp, controlplanev1.KubeadmControlPlaneEtcdClusterHealthyCondition).Reason; r != clusterv1.ConnectionDownReason {
			return "EtcdClusterHealthy reason " + r
		}
		return ""
	})

	proxy.Restore(t)
	back := time.Now()
	fixture.Eventually(t, "health read again once the cluster answers", 30*time.Second, healthy)
	t.Logf("health conditions read again %s after the cluster answered", time.Since(back).Round(time.Second))
	if err := c.Delete(ctx, getKCP(t, ns)); err != nil {
		t.Fatal(err)
	}
}
