package cluster_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/manager"
	"capstan.dev/capstan/internal/testenv"
	"capstan.dev/capstan/test/fixture"
	"capstan.dev/capstan/test/provider"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	e, err := testenv.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	env = e
	if os.Getenv("CAPSTAN_TEST_LOGS") != "" {
		ctrl.SetLogger(zap.New(zap.UseDevMode(true)))
	} else {
		ctrl.SetLogger(zap.New(zap.WriteTo(io.Discard)))
	}
	ctx, cancel := context.WithCancel(context.Background())
	code := func() int {
		if err := provider.Install(ctx, env.Client); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		mgr, err := manager.New(env.Config, manager.Options{MetricsAddr: "0", ProbeAddr: "0"})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		go func() {
			if err := mgr.Start(ctx); err != nil {
				fmt.Fprintln(os.Stderr, "manager:", err)
			}
		}()
		return m.Run()
	}()
	cancel()
	env.Stop()
	os.Exit(code)
}

// clusterCheck polls the cluster until check passes, and fails with the last
// reason check gave.
func clusterCheck(t *testing.T, key client.ObjectKey, check func(*clusterv1.Cluster) string) *clusterv1.Cluster {
	t.Helper()
	c := &clusterv1.Cluster{}
	fixture.Eventually(t, "cluster "+key.Name, 30*time.Second, func(ctx context.Context) string {
		if err := env.Client.Get(ctx, key, c); err != nil {
			return err.Error()
		}
		if why := check(c); why != "" {
			return fmt.Sprintf("%s (conditions %+v)", why, c.Status.Conditions)
		}
		return ""
	})
	return c
}

func TestClusterFollowsItsInfrastructureAndControlPlane(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	infra := provider.InfraCluster.New(ns, "c1", nil)
	cp := provider.ControlPlane.New(ns, "c1", map[string]any{"replicas": int64(3)})
	cluster := fixture.NewCluster(ns, "c1", fixture.Infrastructure(infra), fixture.ControlPlane(cp))
	fixture.Create(t, env.Client, infra, cp, cluster)
	key := client.ObjectKeyFromObject(cluster)

	clusterCheck(t, key, func(c *clusterv1.Cluster) string {
		if !strings.Contains(strings.Join(c.Finalizers, ","), clusterv1.ClusterFinalizer) {
			return "no finalizer"
		}
		if c.Status.Phase != string(clusterv1.ClusterPhaseProvisioning) {
			return "phase " + c.Status.Phase
		}
		return fixture.Condition(c.Status.Conditions, clusterv1.InfrastructureReadyCondition, metav1.ConditionFalse)
	})
	for _, o := range []*unstructured.Unstructured{infra, cp} {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
			t.Fatal(err)
		}
		refs := o.GetOwnerReferences()
		if len(refs) != 1 || refs[0].Kind != "Cluster" || refs[0].Name != "c1" || !ptr.Deref(refs[0].Controller, false) {
			t.Errorf("%s owner references %+v, want the Cluster as controller", o.GetKind(), refs)
		}
	}

	// The provider provisions the infrastructure and publishes the endpoint.
	// A merge patch: the Cluster controller writes the object too.
	if err := env.Client.Patch(ctx, infra, client.RawPatch("application/merge-patch+json",
		[]byte(`{"spec":{"controlPlaneEndpoint":{"host":"10.0.0.1","port":6443}}}`))); err != nil {
		t.Fatal(err)
	}
	if err := provider.SetStatus(ctx, env.Client, infra, map[string]any{
		"initialization": map[string]any{"provisioned": true},
		"failureDomains": []any{map[string]any{"name": "fd-a", "controlPlane": true}},
	}); err != nil {
		t.Fatal(err)
	}
	c := clusterCheck(t, key, func(c *clusterv1.Cluster) string {
		if c.Status.Phase != string(clusterv1.ClusterPhaseProvisioned) {
			return "phase " + c.Status.Phase
		}
		if c.Spec.ControlPlaneEndpoint.Host != "10.0.0.1" || c.Spec.ControlPlaneEndpoint.Port != 6443 {
			return fmt.Sprintf("endpoint %+v", c.Spec.ControlPlaneEndpoint)
		}
		return fixture.Condition(c.Status.Conditions, clusterv1.InfrastructureReadyCondition, metav1.ConditionTrue)
	})
	if len(c.Status.FailureDomains) != 1 || c.Status.FailureDomains[0].Name != "fd-a" {
		t.Errorf("failure domains %+v", c.Status.FailureDomains)
	}
	if got := fixture.Condition(c.Status.Conditions, clusterv1.ClusterControlPlaneInitializedCondition, metav1.ConditionFalse); got != "" {
		t.Error(got)
	}

	// Once the infrastructure is provisioned the workload cluster is probed,
	// before the control plane is initialized, and the condition says why
	// it does not answer.
	probeSays := func(want string) {
		t.Helper()
		clusterCheck(t, key, func(c *clusterv1.Cluster) string {
			cond := meta.FindStatusCondition(c.Status.Conditions, clusterv1.ClusterRemoteConnectionProbeCondition)
			if cond == nil || cond.Status != metav1.ConditionFalse || !strings.Contains(cond.Message, want) {
				return fmt.Sprintf("RemoteConnectionProbe %+v should be False and say %q", cond, want)
			}
			return ""
		})
	}
	probeSays("Secret " + ns + "/c1-kubeconfig does not exist")

	// The management plane stands in for the workload cluster, first at an
	// address where nothing listens.
	kubeconfig, err := os.ReadFile(filepath.Join(env.StateDir, "kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c1-kubeconfig", Labels: map[string]string{clusterv1.ClusterNameLabel: "c1"}},
		Data:       map[string][]byte{"value": kubeconfigAt(t, kubeconfig, "https://127.0.0.1:1")},
	}
	fixture.Create(t, env.Client, secret)
	probeSays("connection refused")

	// The control plane comes up.
	if err := provider.SetStatus(ctx, env.Client, cp, map[string]any{
		"initialization": map[string]any{"controlPlaneInitialized": true},
		"replicas":       int64(3), "readyReplicas": int64(2), "availableReplicas": int64(2), "upToDateReplicas": int64(3),
		"conditions": []any{map[string]any{"type": "Available", "status": "True", "reason": "Available", "lastTransitionTime": "2026-01-01T00:00:00Z"}},
	}); err != nil {
		t.Fatal(err)
	}
	c = clusterCheck(t, key, func(c *clusterv1.Cluster) string {
		if cp := c.Status.ControlPlane; cp == nil || ptr.Deref(cp.ReadyReplicas, -1) != 2 || ptr.Deref(cp.DesiredReplicas, -1) != 3 {
			return fmt.Sprintf("control plane counters %+v", c.Status.ControlPlane)
		}
		if why := fixture.Condition(c.Status.Conditions, clusterv1.ClusterControlPlaneAvailableCondition, metav1.ConditionTrue); why != "" {
			return why
		}
		return fixture.Condition(c.Status.Conditions, clusterv1.ClusterControlPlaneInitializedCondition, metav1.ConditionTrue)
	})
	if w := c.Status.Workers; w == nil || ptr.Deref(w.DesiredReplicas, -1) != 0 {
		t.Errorf("workers %+v, want zero desired", w)
	}
	probeSays("connection refused")

	// The kubeconfig is corrected: the shared connection follows it.
	secret.Data["value"] = kubeconfig
	if err := env.Client.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	clusterCheck(t, key, func(c *clusterv1.Cluster) string {
		if why := fixture.Condition(c.Status.Conditions, clusterv1.ClusterRemoteConnectionProbeCondition, metav1.ConditionTrue); why != "" {
			return why
		}
		return fixture.Condition(c.Status.Conditions, clusterv1.AvailableCondition, metav1.ConditionTrue)
	})
}

// kubeconfigAt returns the kubeconfig with every cluster's server set to url.
func kubeconfigAt(t *testing.T, kubeconfig []byte, url string) []byte {
	t.Helper()
	cfg, err := clientcmd.Load(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, cluster := range cfg.Clusters {
		cluster.Server = url
	}
	out, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestClusterReadsV1beta1Providers(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	// A provider still on the v1beta1 contract reports status.ready.
	legacy := provider.Kind{Group: provider.InfrastructureGroup, Kind: "LegacyTestMachine", Version: "v1beta1"}
	infra := legacy.New(ns, "old", map[string]any{"controlPlaneEndpoint": map[string]any{"host": "h", "port": int64(443)}})
	cluster := fixture.NewCluster(ns, "old", fixture.Infrastructure(infra))
	fixture.Create(t, env.Client, infra, cluster)
	if err := provider.SetStatus(ctx, env.Client, infra, map[string]any{"ready": true}); err != nil {
		t.Fatal(err)
	}
	clusterCheck(t, client.ObjectKeyFromObject(cluster), func(c *clusterv1.Cluster) string {
		if c.Status.Phase != string(clusterv1.ClusterPhaseProvisioned) {
			return "phase " + c.Status.Phase
		}
		return ""
	})
}

func TestUninstalledProviderIsExplained(t *testing.T) {
	ns := env.Namespace(t)
	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nope"}}
	cluster.Spec.InfrastructureRef = clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.example.com", Kind: "MissingCluster", Name: "x"}
	fixture.Create(t, env.Client, cluster)
	clusterCheck(t, client.ObjectKeyFromObject(cluster), func(c *clusterv1.Cluster) string {
		cond := meta.FindStatusCondition(c.Status.Conditions, clusterv1.InfrastructureReadyCondition)
		if cond == nil || !strings.Contains(cond.Message, "missingclusters.infrastructure.example.com") {
			return fmt.Sprintf("InfrastructureReady %+v does not name the missing CRD", cond)
		}
		return ""
	})
}

func TestPausedClusterIsLeftAlone(t *testing.T) {
	ns := env.Namespace(t)
	infra := provider.InfraCluster.New(ns, "p", nil)
	cluster := fixture.NewCluster(ns, "p", fixture.Infrastructure(infra))
	cluster.Spec.Paused = ptr.To(true)
	fixture.Create(t, env.Client, infra, cluster)
	c := clusterCheck(t, client.ObjectKeyFromObject(cluster), func(c *clusterv1.Cluster) string {
		return fixture.Condition(c.Status.Conditions, clusterv1.PausedCondition, metav1.ConditionTrue)
	})
	if len(c.Finalizers) != 0 || c.Status.Phase != "" {
		t.Errorf("a paused Cluster was acted on: finalizers %v, phase %q", c.Finalizers, c.Status.Phase)
	}
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(infra), infra); err != nil {
		t.Fatal(err)
	}
	if len(infra.GetOwnerReferences()) != 0 {
		t.Errorf("a paused Cluster took ownership of its infrastructure")
	}
}
