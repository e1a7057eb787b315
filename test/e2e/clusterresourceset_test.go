package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	addonsv1 "capstan.dev/capstan/api/addons/v1beta2"
	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/test/fixture"
)

// webDeployment is the add-on: a Deployment of replicas pause Pods.
func webDeployment(replicas int) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: kube-system
spec:
  replicas: %d
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: registry.k8s.io/pause:3.10
`, replicas)
}

// TestClusterResourceSetOnLocalCluster drives ClusterResourceSets with the
// real binary on the local provider, as a user would: a ConfigMap holding a
// Deployment manifest reaches a new cluster labelled for it, a change to it
// is applied again under the Reconcile strategy, and a second set reaches
// the cluster once the cluster is labelled for that one too.
func TestClusterResourceSetOnLocalCluster(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a workload cluster")
	}
	p := newPlane(t)
	p.up()
	ctx := context.Background()
	mc := p.client()

	web := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"}, Data: map[string]string{"web.yaml": webDeployment(1)}}
	extra := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "extra"},
		Data: map[string]string{"extra.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: extra}\ndata: {added: later}\n"}}
	crs := func(name string, strategy addonsv1.ClusterResourceSetStrategy, label string) *addonsv1.ClusterResourceSet {
		return &addonsv1.ClusterResourceSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
			Spec: addonsv1.ClusterResourceSetSpec{
				ClusterSelector: metav1.LabelSelector{MatchLabels: map[string]string{label: "yes"}},
				Strategy:        string(strategy),
				Resources:       []addonsv1.ResourceRef{{Kind: "ConfigMap", Name: name}},
			},
		}
	}
	fixture.Create(t, mc, web, extra, crs("web", addonsv1.ClusterResourceSetStrategyReconcile, "web"), crs("extra", "", "extra"))

	// The cluster is created labelled for the first set, the way a user
	// applies a generated template; `up --cluster` then finds it and waits.
	manifest, code := capstan(t, "generate", "cluster", "addons", "--worker-machine-count", "0")
	if code != 0 {
		t.Fatalf("capstan generate cluster exited %d:\n%s", code, manifest)
	}
	createLabelled(t, mc, manifest, map[string]string{"web": "yes"})
	if out, code := capstan(t, "up", "--state-dir", p.dir, "--cluster", "addons", "--worker-machine-count", "0", "--cluster-timeout", "4m"); code != 0 {
		t.Fatalf("capstan up --cluster exited %d:\n%s\nlog:\n%s", code, out, tail(p.log(), 60))
	}
	wcfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(p.dir, "addons.kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	wl := kubernetes.NewForConfigOrDie(wcfg)
	webReplicas := func(want int32) func(context.Context) string {
		return func(ctx context.Context) string {
			d, err := wl.AppsV1().Deployments("kube-system").Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				return err.Error()
			}
			return fixture.Unless(ptr.Deref(d.Spec.Replicas, 0) == want, fmt.Sprintf("%d replicas", ptr.Deref(d.Spec.Replicas, 0)))
		}
	}
	fixture.Eventually(t, "the web Deployment in the workload cluster", 2*time.Minute, webReplicas(1))

	if err := mc.Get(ctx, client.ObjectKeyFromObject(web), web); err != nil {
		t.Fatal(err)
	}
	web.Data["web.yaml"] = webDeployment(2)
	if err := mc.Update(ctx, web); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, "the changed Deployment applied again", time.Minute, webReplicas(2))

	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "addons"}}
	if err := mc.Patch(ctx, cluster, client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"labels":{"extra":"yes"}}}`))); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, "the second set's ConfigMap in the workload cluster", time.Minute, func(ctx context.Context) string {
		cm, err := wl.CoreV1().ConfigMaps("default").Get(ctx, "extra", metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		return fixture.Unless(cm.Data["added"] == "later", fmt.Sprint(cm.Data))
	})
	fixture.Eventually(t, "the binding records both sets", time.Minute, func(ctx context.Context) string {
		b := &addonsv1.ClusterResourceSetBinding{}
		if err := mc.Get(ctx, client.ObjectKeyFromObject(cluster), b); err != nil {
			return err.Error()
		}
		return fixture.Unless(b.Entry("web") != nil && b.Entry("extra") != nil, fmt.Sprint(b.Spec.Bindings))
	})
}

// createLabelled creates the objects of a manifest, giving the Cluster the
// labels.
func createLabelled(t *testing.T, c client.Client, manifest string, labels map[string]string) {
	t.Helper()
	r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(manifest)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		obj := &unstructured.Unstructured{}
		if err := utilyaml.Unmarshal(doc, &obj.Object); err != nil {
			t.Fatal(err)
		}
		if len(obj.Object) == 0 {
			continue
		}
		if obj.GetKind() == "Cluster" {
			obj.SetLabels(labels)
		}
		fixture.Create(t, c, obj)
	}
}
