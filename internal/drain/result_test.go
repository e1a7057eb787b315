package drain

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func nn(s string) types.NamespacedName {
	ns, name, _ := strings.Cut(s, "/")
	return types.NamespacedName{Namespace: ns, Name: name}
}

func nns(ss ...string) []types.NamespacedName {
	out := make([]types.NamespacedName, len(ss))
	for i, s := range ss {
		out[i] = nn(s)
	}
	return out
}

func TestResultMessage(t *testing.T) {
	tests := []struct {
		name string
		r    Result
		done bool
		want string
	}{
		{
			name: "nothing on the node",
			r:    Result{Node: "n1"},
			done: true,
			want: "node n1 drained",
		},
		{
			name: "only skipped pods left",
			r:    Result{Node: "n1", Skipped: []Skipped{{Pod: nn("kube-system/proxy"), Reason: "DaemonSet pod"}, {Pod: nn("kube-system/etcd"), Reason: "mirror pod"}}},
			done: true,
			want: "node n1 drained (2 pods skipped)",
		},
		{
			name: "node gone",
			r:    Result{Node: "n1", NodeNotFound: true},
			done: true,
			want: "node n1 not found, nothing to drain",
		},
		{
			name: "the brief's example",
			r: Result{
				Node:        "n1",
				Evicted:     nns("a/x", "a/y"),
				Blocked:     []Blocked{{Pod: nn("a/web-1"), ByBudget: true, Budget: "web-pdb", Message: "The disruption budget web-pdb needs 1 healthy pods and has 1 currently"}},
				Terminating: nns("a/slow"),
			},
			want: "draining node n1: 2 pods evicted, 1 blocked by PodDisruptionBudget web-pdb, 1 terminating",
		},
		{
			name: "singular noun goes on the first part",
			r:    Result{Node: "n1", Terminating: nns("a/slow"), WaitingCompletion: nns("a/job", "a/job2")},
			want: "draining node n1: 1 pod terminating, 2 waiting to complete",
		},
		{
			name: "several budgets, an unnamed one, a failure, a later batch",
			r: Result{
				Node: "n1",
				Blocked: []Blocked{
					{Pod: nn("a/web-1"), ByBudget: true, Budget: "web-pdb"},
					{Pod: nn("b/db-0"), ByBudget: true, Budget: "db-pdb"},
					{Pod: nn("b/db-1"), ByBudget: true, Budget: "db-pdb"},
					{Pod: nn("c/q"), ByBudget: true},
					{Pod: nn("c/r"), Message: "namespace c is being terminated"},
				},
				Deferred: nns("d/osd-0"),
			},
			want: "draining node n1: 3 pods blocked by PodDisruptionBudgets db-pdb and web-pdb, 1 blocked by a PodDisruptionBudget, 1 could not be evicted: namespace c is being terminated, 1 waiting for a lower drain order",
		},
		{
			name: "a long API message is cut",
			r:    Result{Node: "n1", Blocked: []Blocked{{Pod: nn("a/b"), Message: strings.Repeat("é", 100)}}},
			want: "draining node n1: 1 pod could not be evicted: " + strings.Repeat("é", 60) + "…",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.r.Done(); got != tt.done {
				t.Errorf("Done() = %v, want %v", got, tt.done)
			}
			if got := tt.r.Message(); got != tt.want {
				t.Errorf("Message()\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestResultDetails(t *testing.T) {
	r := Result{
		Node:    "n1",
		Evicted: nns("a/p1", "a/p2", "a/p3", "a/p4", "a/p5", "a/p6", "a/p7"),
		Blocked: []Blocked{
			{Pod: nn("a/web-1"), ByBudget: true, Budget: "web-pdb", Message: "The disruption budget web-pdb needs 1 healthy pods and has 1 currently"},
			{Pod: nn("a/web-2"), ByBudget: true, Budget: "web-pdb", Message: "The disruption budget web-pdb needs 1 healthy pods and has 1 currently"},
		},
		Terminating: nns("a/slow"),
		Skipped:     []Skipped{{Pod: nn("kube-system/proxy"), Reason: "DaemonSet pod"}},
	}
	want := strings.Join([]string{
		"* Pods evicted: a/p1, a/p2, a/p3, a/p4, a/p5, … (2 more)",
		"* Pods not evicted (The disruption budget web-pdb needs 1 healthy pods and has 1 currently): a/web-1, a/web-2",
		"* Pods terminating: a/slow",
	}, "\n")
	if got := r.Details(); got != want {
		t.Errorf("Details()\n got %q\nwant %q", got, want)
	}
	if got := (Result{Node: "n1"}).Details(); got != "" {
		t.Errorf("Details() of a drained node = %q, want empty", got)
	}
}

func TestResultDetailsSayWhyPodsWait(t *testing.T) {
	r := Result{
		Node:              "n1",
		WaitingCompletion: nns("batch/job-1", "batch/job-2", "a/backup", "a/plain"),
		Deferred:          nns("mon/prom-0", "mon/prom-1"),
		Why: map[types.NamespacedName]string{
			nn("batch/job-1"): "MachineDrainRule wait-for-batch",
			nn("batch/job-2"): "MachineDrainRule wait-for-batch",
			nn("a/backup"):    "label cluster.x-k8s.io/drain=wait-completed",
			nn("mon/prom-0"):  "order 100, MachineDrainRule observability-last",
			nn("mon/prom-1"):  "order 100, MachineDrainRule observability-last",
		},
	}
	want := strings.Join([]string{
		"* Pods waiting to complete: a/plain",
		"* Pods waiting to complete (MachineDrainRule wait-for-batch): batch/job-1, batch/job-2",
		"* Pods waiting to complete (label cluster.x-k8s.io/drain=wait-completed): a/backup",
		"* Pods waiting for a lower drain order (order 100, MachineDrainRule observability-last): mon/prom-0, mon/prom-1",
	}, "\n")
	if got := r.Details(); got != want {
		t.Errorf("Details()\n got %q\nwant %q", got, want)
	}
}

// However many rules hold pods back, Details keeps to a few lines, so that
// the Deleting condition stays within the API's limits.
func TestResultDetailsBoundsTheGroups(t *testing.T) {
	r := Result{Node: "n1", Why: map[types.NamespacedName]string{}}
	for i := range 7 {
		pod := nn(fmt.Sprintf("a/p%d", i))
		r.Deferred = append(r.Deferred, pod)
		r.Why[pod] = fmt.Sprintf("order %d, MachineDrainRule r%d", 10+i, i)
	}
	want := strings.Join([]string{
		"* Pods waiting for a lower drain order (order 10, MachineDrainRule r0): a/p0",
		"* Pods waiting for a lower drain order (order 11, MachineDrainRule r1): a/p1",
		"* Pods waiting for a lower drain order (order 12, MachineDrainRule r2): a/p2",
		"* Pods waiting for a lower drain order (order 13, MachineDrainRule r3): a/p3",
		"* Pods waiting for a lower drain order (order 14, MachineDrainRule r4): a/p4",
		"* Pods waiting for a lower drain order: 2 pods more, for other reasons",
	}, "\n")
	if got := r.Details(); got != want {
		t.Errorf("Details()\n got %q\nwant %q", got, want)
	}
}

func TestTimeoutPassed(t *testing.T) {
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		start   time.Time
		now     time.Time
		seconds int32
		want    bool
	}{
		{"no timeout", start, start.Add(24 * time.Hour), 0, false},
		{"negative means none", start, start.Add(24 * time.Hour), -1, false},
		{"not started", time.Time{}, start, 10, false},
		{"before", start, start.Add(9 * time.Second), 10, false},
		{"exactly at", start, start.Add(10 * time.Second), 10, true},
		{"after", start, start.Add(11 * time.Second), 10, true},
		{"clock behind start", start, start.Add(-time.Minute), 10, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := TimeoutPassed(tt.start, tt.now, tt.seconds); got != tt.want {
				t.Errorf("TimeoutPassed = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestNodeUnreachable(t *testing.T) {
	node := func(conds ...corev1.NodeCondition) *corev1.Node {
		return &corev1.Node{Status: corev1.NodeStatus{Conditions: conds}}
	}
	tests := []struct {
		name string
		node *corev1.Node
		want bool
	}{
		{"no conditions", node(), false},
		{"ready", node(corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue}), false},
		{"not ready", node(corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionFalse}), false},
		{"unknown", node(corev1.NodeCondition{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse}, corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionUnknown}), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := NodeUnreachable(tt.node); got != tt.want {
				t.Errorf("NodeUnreachable = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestBudgetName(t *testing.T) {
	tests := map[string]string{
		"The disruption budget web-pdb needs 1 healthy pods and has 1 currently": "web-pdb",
		"The disruption budget web-pdb is still being processed by the server.":  "web-pdb",
		"The disruption budget x does not allow evicting pods currently":         "x",
		"something else": "",
	}
	for cause, want := range tests {
		if got := budgetName(cause); got != want {
			t.Errorf("budgetName(%q) = %q, want %q", cause, got, want)
		}
	}
}

func TestUnprocessedBudget(t *testing.T) {
	ready := func(p *corev1.Pod) {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	}
	web := func(opts ...podOpt) *corev1.Pod {
		p := pod("web-1", append([]podOpt{withLabel("app", "web")}, opts...)...)
		return &p
	}
	budget := func(name string, sel *metav1.LabelSelector, generation, observed int64, mod ...func(*policyv1.PodDisruptionBudget)) policyv1.PodDisruptionBudget {
		b := policyv1.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "apps", Generation: generation},
			Spec:       policyv1.PodDisruptionBudgetSpec{Selector: sel},
			Status:     policyv1.PodDisruptionBudgetStatus{ObservedGeneration: observed},
		}
		for _, m := range mod {
			m(&b)
		}
		return b
	}
	webSel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	otherSel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}
	alwaysAllow := func(b *policyv1.PodDisruptionBudget) {
		p := policyv1.AlwaysAllow
		b.Spec.UnhealthyPodEvictionPolicy = &p
	}
	healthyEnough := func(b *policyv1.PodDisruptionBudget) { b.Status.CurrentHealthy, b.Status.DesiredHealthy = 2, 1 }

	tests := []struct {
		name string
		pod  *corev1.Pod
		pdbs []policyv1.PodDisruptionBudget
		want string
	}{
		{"no budgets", web(ready), nil, ""},
		{"processed budget", web(ready), []policyv1.PodDisruptionBudget{budget("web-pdb", webSel, 2, 2)}, ""},
		{"unprocessed budget guards a ready pod", web(ready), []policyv1.PodDisruptionBudget{budget("web-pdb", webSel, 1, 0)}, "web-pdb"},
		{"unprocessed budget of other pods", web(ready), []policyv1.PodDisruptionBudget{budget("db-pdb", otherSel, 1, 0)}, ""},
		{"nil selector selects nothing", web(ready), []policyv1.PodDisruptionBudget{budget("none", nil, 1, 0)}, ""},
		{"empty selector selects all", web(ready), []policyv1.PodDisruptionBudget{budget("all", &metav1.LabelSelector{}, 1, 0)}, "all"},
		{"two budgets are the API's error", web(ready), []policyv1.PodDisruptionBudget{budget("a", webSel, 1, 0), budget("b", webSel, 1, 0)}, ""},
		{"pending pod ignores budgets", web(ready, phase(corev1.PodPending)), []policyv1.PodDisruptionBudget{budget("web-pdb", webSel, 1, 0)}, ""},
		{"unready pod, AlwaysAllow", web(), []policyv1.PodDisruptionBudget{budget("web-pdb", webSel, 1, 0, alwaysAllow)}, ""},
		{"unready pod, budget healthy enough", web(), []policyv1.PodDisruptionBudget{budget("web-pdb", webSel, 1, 0, healthyEnough)}, ""},
		{"unready pod, budget not healthy", web(), []policyv1.PodDisruptionBudget{budget("web-pdb", webSel, 1, 0)}, "web-pdb"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ""
			if b := unprocessedBudget(tt.pod, tt.pdbs); b != nil {
				got = b.Name
			}
			if got != tt.want {
				t.Errorf("unprocessedBudget = %q, want %q", got, tt.want)
			}
		})
	}
}
