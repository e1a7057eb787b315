package move_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"capstan.dev/capstan/internal/move"
	"capstan.dev/capstan/internal/testenv"
	"capstan.dev/capstan/test/fixture"
	"capstan.dev/capstan/test/provider"
)

var planes *fixture.Planes

func TestMain(m *testing.M) {
	// A fuzzing run (go test -fuzz FuzzX) needs no planes: the fuzz
	// targets move between directories, and every fuzz worker process
	// would start its own two.
	if testenv.Fuzzing() {
		os.Exit(m.Run())
	}
	code := func() int {
		ctx := context.Background()
		p, stop, err := fixture.StartPlanes(ctx)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer stop()
		// The target needs the same kinds as the source.
		if err := provider.Install(ctx, p.Workload.Client); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		planes = p
		return m.Run()
	}()
	os.Exit(code)
}

const core = "cluster.x-k8s.io/v1beta2"

// graph is the synthetic cluster graph a test moves: what it expects to
// move, and what must stay.
type graph struct {
	ns    string
	moved []*unstructured.Unstructured // as created in the source, status included
	stays []*unstructured.Unstructured
}

func newObj(apiVersion, kind, ns, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace(ns)
	u.SetName(name)
	if spec != nil {
		u.Object["spec"] = spec
	}
	return u
}

func ref(k provider.Kind, name string) map[string]any {
	return map[string]any{"apiGroup": k.Group, "kind": k.Kind, "name": name}
}

// buildGraph creates, in c, a cluster of two Machines (one of a control
// plane, one of a MachineDeployment's MachineSet) with their provider
// objects, statuses, secrets, templates referenced only from spec, a
// ConfigMap labelled for move with one it owns, and objects that must not
// move.
func buildGraph(t *testing.T, c client.Client, ns string) *graph {
	t.Helper()
	ctx := context.Background()
	g := &graph{ns: ns}
	create := func(u *unstructured.Unstructured, stays bool, status map[string]any, owners ...*unstructured.Unstructured) *unstructured.Unstructured {
		t.Helper()
		var refs []metav1.OwnerReference
		for i, o := range owners {
			refs = append(refs, metav1.OwnerReference{APIVersion: o.GetAPIVersion(), Kind: o.GetKind(), Name: o.GetName(), UID: o.GetUID(), Controller: ptrTo(i == 0)})
		}
		u.SetOwnerReferences(refs)
		if err := c.Create(ctx, u); err != nil {
			t.Fatalf("creating %s %s: %v", u.GetKind(), u.GetName(), err)
		}
		if status != nil {
			u.Object["status"] = status
			if err := c.Status().Update(ctx, u); err != nil {
				t.Fatalf("status of %s %s: %v", u.GetKind(), u.GetName(), err)
			}
		}
		if stays {
			g.stays = append(g.stays, u)
		} else {
			g.moved = append(g.moved, u)
		}
		return u
	}
	cl := create(newObj(core, "Cluster", ns, "c1", map[string]any{
		"infrastructureRef": ref(provider.InfraCluster, "c1"),
		"controlPlaneRef":   ref(provider.ControlPlane, "c1-cp"),
	}), false, map[string]any{"phase": "Provisioned", "initialization": map[string]any{"infrastructureProvisioned": true}})
	infra := create(provider.InfraCluster.New(ns, "c1", map[string]any{"controlPlaneEndpoint": map[string]any{"host": "127.0.0.1", "port": int64(6443)}}),
		false, map[string]any{"initialization": map[string]any{"provisioned": true}}, cl)
	_ = infra
	cp := create(provider.ControlPlane.New(ns, "c1-cp", map[string]any{"replicas": int64(1)}), false,
		map[string]any{"replicas": int64(1), "initialization": map[string]any{"controlPlaneInitialized": true}}, cl)
	create(&unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"namespace": ns, "name": "c1-kubeconfig"}, "data": map[string]any{"value": "a3ViZWNvbmZpZw=="}}}, false, nil)
	ca := newObj("v1", "Secret", ns, "c1-ca", nil)
	ca.Object["type"] = "cluster.x-k8s.io/secret"
	ca.Object["data"] = map[string]any{"tls.crt": "AAEC/w==", "tls.key": "/f7/AA=="} // bytes that are not text
	create(ca, false, nil, cp)

	machine := func(name string, owner *unstructured.Unstructured, extraLabels map[string]string) {
		m := newObj(core, "Machine", ns, name, map[string]any{
			"clusterName":       "c1",
			"version":           "v1.35.0",
			"bootstrap":         map[string]any{"configRef": ref(provider.BootstrapConfig, name), "dataSecretName": name + "-data"},
			"infrastructureRef": ref(provider.InfraMachine, name),
		})
		labels := map[string]string{"cluster.x-k8s.io/cluster-name": "c1"}
		for k, v := range extraLabels {
			labels[k] = v
		}
		m.SetLabels(labels)
		m.SetFinalizers([]string{"machine.cluster.x-k8s.io"})
		m = create(m, false, map[string]any{
			"phase":     "Running",
			"nodeRef":   map[string]any{"name": "node-" + name},
			"addresses": []any{map[string]any{"type": "InternalIP", "address": "127.0.0.1"}},
		}, owner)
		im := provider.InfraMachine.New(ns, name, map[string]any{"providerID": "test://" + name})
		im.SetFinalizers([]string{"test.capstan.dev/machine"})
		// A Paused condition says a controller reconciles it: the move
		// pauses it with the paused annotation, and unpauses it at the end.
		create(im, false, map[string]any{"initialization": map[string]any{"provisioned": true}, "pid": int64(4242),
			"conditions": []any{map[string]any{"type": "Paused", "status": "False", "reason": "NotPaused", "lastTransitionTime": "2026-01-01T00:00:00Z"}}}, m)
		bc := create(provider.BootstrapConfig.New(ns, name, nil), false,
			map[string]any{"dataSecretName": name + "-data", "initialization": map[string]any{"dataSecretCreated": true}}, m)
		data := newObj("v1", "Secret", ns, name+"-data", nil)
		data.Object["data"] = map[string]any{"value": "IyBjbG91ZC1jb25maWcK"}
		create(data, false, nil, bc)
	}
	machine("m-cp", cp, map[string]string{"cluster.x-k8s.io/control-plane": ""})

	template := map[string]any{"template": map[string]any{"spec": map[string]any{}}}
	create(provider.InfraMachineTemplate.New(ns, "workers", template), false, nil)
	create(provider.BootstrapConfigTemplate.New(ns, "workers", template), false, nil)
	mtSpec := map[string]any{
		"clusterName":       "c1",
		"version":           "v1.35.0",
		"bootstrap":         map[string]any{"configRef": ref(provider.BootstrapConfigTemplate, "workers")},
		"infrastructureRef": ref(provider.InfraMachineTemplate, "workers"),
	}
	md := newObj(core, "MachineDeployment", ns, "workers", map[string]any{
		"clusterName": "c1", "replicas": int64(1),
		"selector": map[string]any{"matchLabels": map[string]any{"pool": "workers"}},
		"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"pool": "workers"}}, "spec": mtSpec},
	})
	md.SetLabels(map[string]string{"cluster.x-k8s.io/cluster-name": "c1"})
	md = create(md, false, map[string]any{"replicas": int64(1), "phase": "Running"}, cl)
	ms := newObj(core, "MachineSet", ns, "workers-abc", map[string]any{
		"clusterName": "c1", "replicas": int64(1),
		"selector": map[string]any{"matchLabels": map[string]any{"pool": "workers"}},
		"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"pool": "workers"}}, "spec": mtSpec},
	})
	ms.SetLabels(map[string]string{"cluster.x-k8s.io/cluster-name": "c1", "cluster.x-k8s.io/deployment-name": "workers"})
	ms = create(ms, false, map[string]any{"replicas": int64(1)}, md)
	machine("workers-abc-x", ms, map[string]string{"pool": "workers"})

	extra := newObj("v1", "ConfigMap", ns, "extra", nil)
	extra.SetLabels(map[string]string{move.MoveLabel: ""})
	extra.Object["data"] = map[string]any{"k": "v"}
	extra = create(extra, false, nil)
	ownedByExtra := newObj("v1", "ConfigMap", ns, "owned-by-extra", nil)
	ownedByExtra.Object["data"] = map[string]any{"k": "w"}
	create(ownedByExtra, false, nil, extra)

	create(&unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"namespace": ns, "name": "stays"}, "data": map[string]any{"k": "v"}}}, true, nil)
	create(&unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"namespace": ns, "name": "other-kubeconfig"}, "data": map[string]any{"value": "eA=="}}}, true, nil)
	create(provider.InfraMachine.New(ns, "unrelated", nil), true, nil)
	return g
}

func ptrTo[T any](v T) *T { return &v }

func get(t *testing.T, c client.Client, like *unstructured.Unstructured) (*unstructured.Unstructured, bool) {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(like.GroupVersionKind())
	err := c.Get(context.Background(), client.ObjectKeyFromObject(like), u)
	if apierrors.IsNotFound(err) {
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return u, true
}

func describe(u *unstructured.Unstructured) string { return u.GetKind() + " " + u.GetName() }

// expectMoved checks that every moved object is in `to` exactly once, as
// it was (spec, data, labels, status), its owner references pointing at
// the owners' copies, none left in `from`, and the objects that stay
// untouched in `from` and absent from `to`.
func expectMoved(t *testing.T, g *graph, from, to client.Client) {
	t.Helper()
	for _, src := range g.moved {
		if _, ok := get(t, from, src); ok {
			t.Errorf("%s is still in the source", describe(src))
		}
		cp, ok := get(t, to, src)
		if !ok {
			t.Errorf("%s is missing in the target", describe(src))
			continue
		}
		for _, f := range []string{"spec", "data", "type", "status"} {
			if !reflect.DeepEqual(src.Object[f], cp.Object[f]) {
				t.Errorf("%s: %s differs:\nsource %v\ncopy   %v", describe(src), f, src.Object[f], cp.Object[f])
			}
		}
		if !reflect.DeepEqual(src.GetLabels(), cp.GetLabels()) {
			t.Errorf("%s: labels %v, want %v", describe(src), cp.GetLabels(), src.GetLabels())
		}
		if !reflect.DeepEqual(src.GetFinalizers(), cp.GetFinalizers()) {
			t.Errorf("%s: finalizers %v, want %v", describe(src), cp.GetFinalizers(), src.GetFinalizers())
		}
		for _, a := range []string{"move.capstan.dev/paused", "cluster.x-k8s.io/paused"} {
			if _, ok := cp.GetAnnotations()[a]; ok {
				t.Errorf("%s still carries the annotation %s", describe(src), a)
			}
		}
		if paused, found, _ := unstructured.NestedBool(cp.Object, "spec", "paused"); found || paused {
			t.Errorf("%s: spec.paused is still set in the target", describe(src))
		}
		if len(cp.GetOwnerReferences()) != len(src.GetOwnerReferences()) {
			t.Errorf("%s: %d owner references, want %d", describe(src), len(cp.GetOwnerReferences()), len(src.GetOwnerReferences()))
		}
		for _, ref := range cp.GetOwnerReferences() {
			gv, _ := schema.ParseGroupVersion(ref.APIVersion)
			owner := &unstructured.Unstructured{}
			owner.SetGroupVersionKind(gv.WithKind(ref.Kind))
			owner.SetNamespace(g.ns)
			owner.SetName(ref.Name)
			o, ok := get(t, to, owner)
			if !ok || o.GetUID() != ref.UID {
				t.Errorf("%s: owner reference %s %s (uid %s) does not point at the owner's copy", describe(src), ref.Kind, ref.Name, ref.UID)
			}
		}
	}
	for _, s := range g.stays {
		if _, ok := get(t, from, s); !ok {
			t.Errorf("%s was deleted from the source, but it is not part of the move", describe(s))
		}
		if _, ok := get(t, to, s); ok {
			t.Errorf("%s was copied, but it is not part of the move", describe(s))
		}
	}
	// None duplicated: as many objects of each kind as moved.
	want := map[schema.GroupVersionKind]int{}
	for _, src := range g.moved {
		want[src.GroupVersionKind()]++
	}
	for gvk, n := range want {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := to.List(context.Background(), list, client.InNamespace(g.ns)); err != nil {
			t.Fatal(err)
		}
		got := 0
		for _, u := range list.Items {
			if !isStays(g, &u) && !(gvk.Kind == "ConfigMap" && u.GetName() == "kube-root-ca.crt") {
				got++
			}
		}
		if got != n {
			t.Errorf("%d %s in the target, want %d", got, gvk.Kind, n)
		}
	}
}

func isStays(g *graph, u *unstructured.Unstructured) bool {
	for _, s := range g.stays {
		if s.GetKind() == u.GetKind() && s.GetName() == u.GetName() {
			return true
		}
	}
	return false
}

var errStop = errors.New("stopped by the test")

func stopAt(step string, n int) func(string, int, move.Key) error {
	return func(s string, i int, _ move.Key) error {
		if s == step && i == n {
			return errStop
		}
		return nil
	}
}

func TestDryRunChangesNothing(t *testing.T) {
	ctx := context.Background()
	src, dst := planes.Mgmt.Client, planes.Workload.Client
	ns := planes.Mgmt.Namespace(t)
	g := buildGraph(t, src, ns)
	var out bytes.Buffer
	if err := move.ToCluster(ctx, src, dst, move.Options{Namespace: ns, DryRun: true, Out: &out}); err != nil {
		t.Fatal(err)
	}
	t.Logf("plan:\n%s", out.String())
	for _, u := range g.moved {
		if !strings.Contains(out.String(), u.GetKind()) || !strings.Contains(out.String(), "/"+u.GetName()+"\n") {
			t.Errorf("the plan does not list %s", describe(u))
		}
	}
	for _, s := range g.stays {
		if strings.Contains(out.String(), "/"+s.GetName()+"\n") {
			t.Errorf("the plan lists %s, which does not move", describe(s))
		}
	}
	cl, _ := get(t, src, g.moved[0])
	if _, found, _ := unstructured.NestedBool(cl.Object, "spec", "paused"); found {
		t.Error("a dry run paused the Cluster")
	}
	for _, u := range g.moved {
		if _, ok := get(t, dst, u); ok {
			t.Errorf("a dry run created %s in the target", describe(u))
		}
	}
	// Order: the Cluster first, the bootstrap data Secrets after their configs.
	plan := out.String()
	if strings.Index(plan, "Cluster "+ns+"/c1") > strings.Index(plan, "Machine "+ns+"/m-cp") ||
		strings.Index(plan, "TestBootstrapConfig."+provider.BootstrapGroup+" "+ns+"/m-cp") > strings.Index(plan, "Secret "+ns+"/m-cp-data") {
		t.Errorf("the plan is not in owner order:\n%s", plan)
	}
}

// TestMoveInterruptedAndResumed moves a cluster graph between two planes,
// interrupted once while creating and once while deleting, then through a
// directory and back, interrupted again each way.
func TestMoveInterruptedAndResumed(t *testing.T) {
	ctx := context.Background()
	a, b := planes.Mgmt.Client, planes.Workload.Client
	ns := planes.Mgmt.Namespace(t)
	g := buildGraph(t, a, ns)
	var out bytes.Buffer
	opts := move.Options{Namespace: ns, Out: &out}

	opts.After = stopAt("create", 6)
	if err := move.ToCluster(ctx, a, b, opts); !errors.Is(err, errStop) {
		t.Fatalf("got %v, want the move stopped after 6 creations", err)
	}
	present := 0
	for _, u := range g.moved {
		if _, ok := get(t, b, u); ok {
			present++
		}
		if _, ok := get(t, a, u); !ok {
			t.Fatalf("%s left the source before the copies were verified", describe(u))
		}
	}
	if present != 6 {
		t.Fatalf("%d objects in the target after 6 creations", present)
	}
	cl, _ := get(t, a, g.moved[0])
	if p, _, _ := unstructured.NestedBool(cl.Object, "spec", "paused"); !p {
		t.Fatal("the source Cluster is not paused")
	}
	for _, u := range g.moved {
		if u.GetKind() == provider.InfraMachine.Kind {
			cur, _ := get(t, a, u)
			if _, ok := cur.GetAnnotations()["cluster.x-k8s.io/paused"]; !ok {
				t.Errorf("%s, which reports a Paused condition, was not paused with the annotation", describe(u))
			}
		}
	}
	tcl, _ := get(t, b, g.moved[0])
	if p, _, _ := unstructured.NestedBool(tcl.Object, "spec", "paused"); !p {
		t.Fatal("the target Cluster is not paused while the move is unfinished")
	}

	opts.After = stopAt("delete", 5)
	if err := move.ToCluster(ctx, a, b, opts); !errors.Is(err, errStop) {
		t.Fatalf("got %v, want the move stopped after 5 deletions", err)
	}
	if !strings.Contains(out.String(), "exists already (earlier run)") {
		t.Errorf("the resumed move did not recognise the earlier copies:\n%s", out.String())
	}
	// Stopped after the last deletion: nothing is left in the source, and
	// the target's Cluster is still paused until the move runs again.
	remaining := len(g.moved) - 5
	opts.After = stopAt("delete", remaining)
	if err := move.ToCluster(ctx, a, b, opts); !errors.Is(err, errStop) {
		t.Fatalf("got %v, want the move stopped after the last deletion", err)
	}
	tcl, _ = get(t, b, g.moved[0])
	if p, _, _ := unstructured.NestedBool(tcl.Object, "spec", "paused"); !p {
		t.Fatal("the target Cluster was unpaused before the move finished")
	}
	opts.After = nil
	out.Reset()
	if err := move.ToCluster(ctx, a, b, opts); err != nil {
		t.Fatalf("resuming: %v\n%s", err, out.String())
	}
	t.Logf("last resumed run:\n%s", out.String())
	if !strings.Contains(out.String(), "Nothing to move") || !strings.Contains(out.String(), "Unpaused Cluster "+ns+"/c1") {
		t.Errorf("the last run did not just unpause the Cluster:\n%s", out.String())
	}
	expectMoved(t, g, a, b)
	if t.Failed() {
		return
	}

	// To a directory (interrupted, resumed) and back into the first plane
	// (interrupted, resumed).
	dir := filepath.Join(t.TempDir(), "moved")
	opts.After = stopAt("create", 4)
	if err := move.ToDirectory(ctx, b, dir, opts); !errors.Is(err, errStop) {
		t.Fatalf("got %v, want the move to a directory stopped after 4 files", err)
	}
	opts.After = nil
	if err := move.ToDirectory(ctx, b, dir, opts); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if len(files) != len(g.moved) {
		t.Fatalf("%d files for %d objects", len(files), len(g.moved))
	}
	opts.After = stopAt("create", 5)
	if err := move.FromDirectory(ctx, dir, a, opts); !errors.Is(err, errStop) {
		t.Fatalf("got %v, want the move from a directory stopped after 5 creations", err)
	}
	opts.After = nil
	out.Reset()
	if err := move.FromDirectory(ctx, dir, a, opts); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	// Back in the first plane, as it was; the directory's copies are the
	// record of the move.
	for _, u := range g.moved {
		if _, ok := get(t, b, u); ok {
			t.Errorf("%s is still in the second plane after the move to a directory", describe(u))
		}
		cp, ok := get(t, a, u)
		if !ok {
			t.Errorf("%s did not come back", describe(u))
			continue
		}
		for _, f := range []string{"spec", "data", "status"} {
			if !reflect.DeepEqual(u.Object[f], cp.Object[f]) {
				t.Errorf("%s: %s differs after the round trip:\nbefore %v\nafter  %v", describe(u), f, u.Object[f], cp.Object[f])
			}
		}
	}
}

// TestMoveRefusesAForeignObject: an object of the same name that is not a
// copy stops the move before anything changes, naming it.
func TestMoveRefusesAForeignObject(t *testing.T) {
	ctx := context.Background()
	a, b := planes.Mgmt.Client, planes.Workload.Client
	ns := planes.Mgmt.Namespace(t)
	g := buildGraph(t, a, ns)
	foreign := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "extra"}, Data: map[string]string{"k": "other"}}
	if err := b.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	if err := b.Create(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	// Found before anything changes: the source is not even paused.
	err := move.ToCluster(ctx, a, b, move.Options{Namespace: ns})
	nothingChanged(t, err, "ConfigMap "+ns+"/extra: the target already has an object of this name that is not a copy")
	untouched(t, a, g)
}

// TestMoveToItselfIsRefused: with the same cluster on both sides every
// object would look like its own copy and be deleted.
func TestMoveToItselfIsRefused(t *testing.T) {
	ctx := context.Background()
	ns := planes.Mgmt.Namespace(t)
	g := buildGraph(t, planes.Mgmt.Client, ns)
	err := move.ToCluster(ctx, planes.Mgmt.Client, planes.Mgmt.Client, move.Options{Namespace: ns})
	if err == nil || !strings.Contains(err.Error(), "same cluster") {
		t.Fatalf("got %v, want a refusal", err)
	}
	for _, u := range g.moved {
		if _, ok := get(t, planes.Mgmt.Client, u); !ok {
			t.Errorf("%s was deleted", describe(u))
		}
	}
}

// TestMoveRefusesObjectsBeingDeleted: an object being deleted is not copied (it
// would come back to life in the target); the move says which one.
func TestMoveRefusesObjectsBeingDeleted(t *testing.T) {
	ctx := context.Background()
	a, b := planes.Mgmt.Client, planes.Workload.Client
	ns := planes.Mgmt.Namespace(t)
	buildGraph(t, a, ns)
	stuck := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "going", Finalizers: []string{"test.capstan.dev/hold"},
		Labels: map[string]string{move.MoveLabel: ""}}}
	if err := a.Create(ctx, stuck); err != nil {
		t.Fatal(err)
	}
	if err := a.Delete(ctx, stuck); err != nil {
		t.Fatal(err)
	}
	err := move.ToCluster(ctx, a, b, move.Options{Namespace: ns})
	if err == nil || !strings.Contains(err.Error(), "ConfigMap "+ns+"/going") || !strings.Contains(err.Error(), "being deleted") {
		t.Fatalf("got %v, want an error naming ConfigMap going", err)
	}
	cl := &unstructured.Unstructured{}
	cl.SetGroupVersionKind(schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "Cluster"})
	cl.SetNamespace(ns)
	cl.SetName("c1")
	cur, _ := get(t, a, cl)
	if _, found, _ := unstructured.NestedBool(cur.Object, "spec", "paused"); found {
		t.Error("the Cluster was paused although the move could not start")
	}
	if err := a.Patch(ctx, stuck, client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`))); err != nil {
		t.Fatal(err)
	}
}
