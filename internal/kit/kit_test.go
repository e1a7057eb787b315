package kit_test

import (
	"context"
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/event"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/kit"
	"capstan.dev/capstan/internal/usererror"
)

type scope struct {
	cluster *clusterv1.Cluster
	ran     bool
}

// writes counts the requests that change the object.
type writes struct{ n int }

func (w *writes) funcs() interceptor.Funcs {
	return interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
			w.n++
			return c.Patch(ctx, obj, p, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
			w.n++
			return c.SubResource(sub).Patch(ctx, obj, p, opts...)
		},
	}
}

func newKit(t *testing.T, w *writes, run func(context.Context, *scope) (ctrl.Result, error)) (*kit.Reconciler[*clusterv1.Cluster, *scope], client.Client) {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clusterv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&clusterv1.Cluster{}).
		WithObjects(&clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}}).
		WithInterceptorFuncs(w.funcs()).Build()
	return &kit.Reconciler[*clusterv1.Cluster, *scope]{
		Client:    c,
		NewObject: func() *clusterv1.Cluster { return &clusterv1.Cluster{} },
		Scope: func(_ context.Context, c *clusterv1.Cluster) (*scope, error) {
			return &scope{cluster: c}, nil
		},
		Run: run,
		Report: func(s *scope) {
			if s.ran {
				s.cluster.Status.Phase = "Reported"
			}
		},
	}, c
}

var req = ctrl.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "c"}}

// Run's changes and the report go out in one write each for the object and
// its status, after Run; a reconcile that changes nothing writes nothing.
func TestReconcileWritesOnceAfterRun(t *testing.T) {
	ctx := context.Background()
	w := &writes{}
	k, c := newKit(t, w, func(_ context.Context, s *scope) (ctrl.Result, error) {
		s.ran = true
		s.cluster.Spec.Paused = ptr.To(false)
		s.cluster.Status.Conditions = []metav1.Condition{{Type: "A", Status: metav1.ConditionTrue, Reason: "R", LastTransitionTime: metav1.Now()}}
		return ctrl.Result{RequeueAfter: time.Minute}, nil
	})
	res, err := k.Reconcile(ctx, req)
	if err != nil || res.RequeueAfter != time.Minute {
		t.Fatalf("result %+v, %v; want a requeue in a minute", res, err)
	}
	if w.n != 2 {
		t.Errorf("%d writes, want 2 (the object, its status)", w.n)
	}
	got := &clusterv1.Cluster{}
	if err := c.Get(ctx, req.NamespacedName, got); err != nil {
		t.Fatal(err)
	}
	if got.Status.Phase != "Reported" || got.Spec.Paused == nil || len(got.Status.Conditions) != 1 {
		t.Errorf("written %+v / %+v, want Run's changes and the report", got.Spec, got.Status)
	}
	w.n = 0
	if _, err := k.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if w.n != 0 {
		t.Errorf("a reconcile that changed nothing wrote %d times", w.n)
	}
}

// An error only a user can fix is reported and retried slowly, not returned.
func TestReconcileUserErrorIsASlowRequeue(t *testing.T) {
	w := &writes{}
	k, _ := newKit(t, w, func(_ context.Context, s *scope) (ctrl.Result, error) {
		s.ran = true
		return ctrl.Result{RequeueAfter: time.Second}, usererror.Mark(errors.New("kind X is not installed"))
	})
	res, err := k.Reconcile(context.Background(), req)
	if err != nil || res.RequeueAfter != usererror.Retry {
		t.Fatalf("result %+v, %v; want no error and a requeue after %s", res, err, usererror.Retry)
	}
	if w.n != 1 {
		t.Errorf("%d writes, want the status reported once", w.n)
	}
	k.Run = func(context.Context, *scope) (ctrl.Result, error) { return ctrl.Result{}, errors.New("boom") }
	if _, err := k.Reconcile(context.Background(), req); err == nil {
		t.Error("another error was swallowed")
	}
}

// NotYet from Scope ends the reconcile without running, reporting or
// writing; an object that is gone is forgotten.
func TestReconcileNotYetAndGone(t *testing.T) {
	w := &writes{}
	k, _ := newKit(t, w, func(context.Context, *scope) (ctrl.Result, error) {
		t.Error("Run ran")
		return ctrl.Result{}, nil
	})
	k.Scope = func(context.Context, *clusterv1.Cluster) (*scope, error) { return nil, kit.NotYet(3 * time.Second) }
	res, err := k.Reconcile(context.Background(), req)
	if err != nil || res.RequeueAfter != 3*time.Second || w.n != 0 {
		t.Errorf("result %+v, %v, %d writes; want a quiet requeue in 3s", res, err, w.n)
	}
	var gone client.ObjectKey
	k.Gone = func(key client.ObjectKey) { gone = key }
	missing := ctrl.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "nope"}}
	if _, err := k.Reconcile(context.Background(), missing); err != nil || gone != missing.NamespacedName {
		t.Errorf("missing object: %v, Gone heard %v", err, gone)
	}
}

func TestClusterChanged(t *testing.T) {
	base := func() *clusterv1.Cluster { return &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "c"}} }
	paused := base()
	paused.Spec.Paused = ptr.To(true)
	initialized := base()
	initialized.Status.Initialization.ControlPlaneInitialized = ptr.To(true)
	counted := base()
	counted.Status.Phase = "Provisioned"
	p := kit.ClusterChanged(kit.ClusterPaused, kit.ClusterControlPlaneInitialized)
	for name, tc := range map[string]struct {
		after *clusterv1.Cluster
		want  bool
	}{
		"paused":      {paused, true},
		"initialized": {initialized, true},
		"other field": {counted, false},
	} {
		if got := p.Update(event.UpdateEvent{ObjectOld: base(), ObjectNew: tc.after}); got != tc.want {
			t.Errorf("%s: passed %v, want %v", name, got, tc.want)
		}
	}
	if !p.Create(event.CreateEvent{Object: base()}) {
		t.Error("a new Cluster was dropped")
	}
}
