package patch_test

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/pace"
	"capstan.dev/capstan/internal/patch"
)

var clusterGate = pace.Fields([]string{"initialization"}, "Paused")

func read(t *testing.T, c *clusterv1.Cluster) *clusterv1.Cluster {
	t.Helper()
	got := &clusterv1.Cluster{}
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(c), got); err != nil {
		t.Fatal(err)
	}
	return got
}

// A reporting-only change inside the interval waits (and says how long); a
// gated change goes out at once and carries the held-back one with it; after
// the interval a reporting-only change goes out again.
func TestPacedStatus(t *testing.T) {
	ctx := context.Background()
	pacer := pace.NewPacer(time.Hour)
	c := createCluster(t)

	write := func(change func(*clusterv1.Cluster)) (*clusterv1.Cluster, time.Duration) {
		t.Helper()
		cur := read(t, c)
		h, err := patch.NewHelper(cur, env.Client, patch.SoleStatusWriter(), patch.Pace(pacer, clusterGate))
		if err != nil {
			t.Fatal(err)
		}
		change(cur)
		if err := h.Patch(ctx, cur); err != nil {
			t.Fatal(err)
		}
		return read(t, c), h.Deferred()
	}

	// A new object's first reporting-only status waits too, as if just
	// written; its first gated change does not.
	got, wait := write(func(c *clusterv1.Cluster) { c.Status.Phase = "Pending" })
	if got.Status.Phase != "" || wait <= 0 {
		t.Fatalf("first reporting-only write: phase %q, deferred %v; want held back", got.Status.Phase, wait)
	}
	got, wait = write(func(c *clusterv1.Cluster) {
		c.Status.Phase = "Pending"
		meta.SetStatusCondition(&c.Status.Conditions, metav1.Condition{Type: "Paused", Status: metav1.ConditionTrue, Reason: "Paused"})
	})
	if got.Status.Phase != "Pending" || wait != 0 {
		t.Fatalf("first gated write: phase %q, deferred %v; want Pending, 0", got.Status.Phase, wait)
	}
	// A counter inside the interval waits; a label change goes out anyway.
	got, wait = write(func(c *clusterv1.Cluster) {
		c.Status.Phase = "Provisioning"
		c.Labels = map[string]string{"a": "b"}
	})
	if got.Status.Phase != "Pending" || got.Labels["a"] != "b" {
		t.Errorf("reporting-only change inside the interval: phase %q (want Pending, held back), labels %v (want written)", got.Status.Phase, got.Labels)
	}
	if wait <= 0 || wait > time.Hour {
		t.Errorf("deferred %v, want the rest of the interval", wait)
	}
	// Turning all-false initialization on from nothing changes no gate.
	got, wait = write(func(c *clusterv1.Cluster) {
		c.Status.Initialization.InfrastructureProvisioned = ptr.To(false)
	})
	if got.Status.Initialization.InfrastructureProvisioned != nil || wait == 0 {
		t.Errorf("a zero-valued field was not held back: %+v, deferred %v", got.Status.Initialization, wait)
	}
	// A gated change goes out at once, with the reporting ones.
	got, wait = write(func(c *clusterv1.Cluster) {
		c.Status.Phase = "Provisioning"
		c.Status.Initialization.InfrastructureProvisioned = ptr.To(true)
	})
	if !ptr.Deref(got.Status.Initialization.InfrastructureProvisioned, false) || got.Status.Phase != "Provisioning" || wait != 0 {
		t.Errorf("gated change: %+v phase %q deferred %v; want written at once", got.Status.Initialization, got.Status.Phase, wait)
	}
	// A gated condition ceasing to be True goes out at once; turning from
	// False to Unknown, or a new message, waits.
	got, _ = write(func(c *clusterv1.Cluster) {
		meta.SetStatusCondition(&c.Status.Conditions, metav1.Condition{Type: "Paused", Status: metav1.ConditionFalse, Reason: "NotPaused"})
	})
	if cond := meta.FindStatusCondition(got.Status.Conditions, "Paused"); cond == nil || cond.Status != metav1.ConditionFalse {
		t.Fatalf("a gated condition turning False was held back: %+v", cond)
	}
	got, _ = write(func(c *clusterv1.Cluster) {
		meta.SetStatusCondition(&c.Status.Conditions, metav1.Condition{Type: "Paused", Status: metav1.ConditionUnknown, Reason: "NotPaused", Message: "more words"})
	})
	if cond := meta.FindStatusCondition(got.Status.Conditions, "Paused"); cond.Message != "" || cond.Status != metav1.ConditionFalse {
		t.Errorf("False to Unknown with a new message went out inside the interval: %+v", cond)
	}
}

// After the interval a reporting-only change goes out.
func TestPacedStatusAfterInterval(t *testing.T) {
	ctx := context.Background()
	pacer := pace.NewPacer(200 * time.Millisecond)
	c := createCluster(t)
	write := func(phase string) time.Duration {
		cur := read(t, c)
		h, _ := patch.NewHelper(cur, env.Client, patch.Pace(pacer, clusterGate))
		cur.Status.Phase = phase
		if err := h.Patch(ctx, cur); err != nil {
			t.Fatal(err)
		}
		return h.Deferred()
	}
	// The first is held back as if just written.
	if wait := write("Pending"); wait <= 0 || read(t, c).Status.Phase != "" {
		t.Fatalf("first reporting-only write went out (deferred %v)", wait)
	}
	for i, phase := range []string{"Pending", "Provisioning"} {
		time.Sleep(250 * time.Millisecond)
		if wait := write(phase); wait != 0 || read(t, c).Status.Phase != phase {
			t.Fatalf("write %d (%s) after the interval was held back %v", i, phase, wait)
		}
	}
}

// A copy read before the controller's own last write writes nothing: its
// changes are computed from what the controller has already replaced.
func TestStaleCopyWritesNothing(t *testing.T) {
	ctx := context.Background()
	pacer := pace.NewPacer(0)
	c := createCluster(t)
	stale := read(t, c)

	cur := stale.DeepCopy()
	h, _ := patch.NewHelper(cur, env.Client, patch.Pace(pacer, clusterGate))
	cur.Status.Phase = "Pending"
	if err := h.Patch(ctx, cur); err != nil {
		t.Fatal(err)
	}
	rv := read(t, c).ResourceVersion
	if !pacer.Behind(stale) || pacer.Behind(read(t, c)) {
		t.Errorf("Behind: the copy before the write %v (want true), the one after %v (want false)", pacer.Behind(stale), pacer.Behind(read(t, c)))
	}

	h, _ = patch.NewHelper(stale, env.Client, patch.Pace(pacer, clusterGate))
	stale.Labels = map[string]string{"from": "stale"}
	stale.Status.Phase = "Provisioning"
	if err := h.Patch(ctx, stale); err != nil {
		t.Fatal(err)
	}
	if got := read(t, c); got.ResourceVersion != rv {
		t.Errorf("a stale copy was written: %v %q", got.Labels, got.Status.Phase)
	}
	if h.Deferred() == 0 {
		t.Error("a stale copy's reconcile was not told to come back")
	}
	// The same Helper, once it has written, is not stale to itself.
	fresh := read(t, c)
	h, _ = patch.NewHelper(fresh, env.Client, patch.Pace(pacer, clusterGate))
	fresh.Labels = map[string]string{"step": "1"}
	if err := h.Patch(ctx, fresh); err != nil {
		t.Fatal(err)
	}
	fresh.Labels["step"] = "2"
	if err := h.Patch(ctx, fresh); err != nil {
		t.Fatal(err)
	}
	if got := read(t, c).Labels["step"]; got != "2" {
		t.Errorf("second Patch of one Helper: label step=%q, want 2", got)
	}
}

// With FirstAtOnce an object's first reporting-only change is not held; the
// next one inside the interval is.
func TestPacedStatusFirstAtOnce(t *testing.T) {
	ctx := context.Background()
	pacer := pace.NewPacer(time.Hour, pace.FirstAtOnce())
	c := createCluster(t)
	for i, phase := range []string{"Pending", "Provisioning"} {
		cur := read(t, c)
		h, _ := patch.NewHelper(cur, env.Client, patch.Pace(pacer, clusterGate))
		cur.Status.Phase = phase
		if err := h.Patch(ctx, cur); err != nil {
			t.Fatal(err)
		}
		held := read(t, c).Status.Phase != phase
		if held != (i == 1) {
			t.Errorf("write %d (%s): held back %v, want %v", i, phase, held, i == 1)
		}
	}
}
