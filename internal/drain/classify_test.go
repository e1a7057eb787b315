package drain

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

var now = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

type podOpt func(*corev1.Pod)

func pod(name string, opts ...podOpt) corev1.Pod {
	p := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: name, UID: types.UID("uid-" + name)},
		Spec:       corev1.PodSpec{NodeName: "n1"},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning},
	}
	for _, o := range opts {
		o(&p)
	}
	return p
}

func inNamespace(ns string) podOpt { return func(p *corev1.Pod) { p.Namespace = ns } }

func withLabel(k, v string) podOpt {
	return func(p *corev1.Pod) {
		if p.Labels == nil {
			p.Labels = map[string]string{}
		}
		p.Labels[k] = v
	}
}

func mirror(p *corev1.Pod) {
	p.Annotations = map[string]string{MirrorPodAnnotation: "0123abcd"}
}

func ownedBy(apiVersion, kind, uid string, controller bool) podOpt {
	return func(p *corev1.Pod) {
		p.OwnerReferences = append(p.OwnerReferences, metav1.OwnerReference{
			APIVersion: apiVersion, Kind: kind, Name: "owner", UID: types.UID(uid), Controller: &controller,
		})
	}
}

func phase(ph corev1.PodPhase) podOpt { return func(p *corev1.Pod) { p.Status.Phase = ph } }

func deletingSince(d time.Duration) podOpt {
	return func(p *corev1.Pod) {
		t := metav1.NewTime(now.Add(-d))
		p.DeletionTimestamp = &t
	}
}

func selector(s string) labels.Selector {
	sel, err := labels.Parse(s)
	if err != nil {
		panic(err)
	}
	return sel
}

func TestClassify(t *testing.T) {
	type want struct {
		action Action
		order  int32
		reason string // checked when not empty
	}
	tests := []struct {
		name   string
		pods   []corev1.Pod
		state  State // Pods and Now are filled in
		policy Policy
		want   map[string]want
	}{
		{
			name: "plain pods are evicted",
			pods: []corev1.Pod{pod("a"), pod("b", phase(corev1.PodPending))},
			want: map[string]want{"a": {action: ActionEvict}, "b": {action: ActionEvict}},
		},
		{
			name: "mirror pod is skipped",
			pods: []corev1.Pod{pod("kube-apiserver-n1", mirror)},
			want: map[string]want{"kube-apiserver-n1": {action: ActionSkip, reason: "mirror pod"}},
		},
		{
			name: "DaemonSet pods are skipped when DaemonSets are not known",
			pods: []corev1.Pod{pod("ds", ownedBy("apps/v1", "DaemonSet", "ds-uid", true))},
			want: map[string]want{"ds": {action: ActionSkip, reason: "DaemonSet pod"}},
		},
		{
			name:  "pod of an existing DaemonSet is skipped, an orphan is evicted",
			pods:  []corev1.Pod{pod("ds", ownedBy("apps/v1", "DaemonSet", "ds-uid", true)), pod("orphan", ownedBy("apps/v1", "DaemonSet", "gone-uid", true))},
			state: State{DaemonSets: map[types.UID]bool{"ds-uid": true}},
			want:  map[string]want{"ds": {action: ActionSkip, reason: "DaemonSet pod"}, "orphan": {action: ActionEvict}},
		},
		{
			name: "only a controlling apps DaemonSet counts",
			pods: []corev1.Pod{
				pod("not-controller", ownedBy("apps/v1", "DaemonSet", "ds-uid", false)),
				pod("other-group", ownedBy("example.com/v1", "DaemonSet", "x-uid", true)),
				pod("replicaset", ownedBy("apps/v1", "ReplicaSet", "rs-uid", true)),
			},
			want: map[string]want{
				"not-controller": {action: ActionEvict},
				"other-group":    {action: ActionEvict},
				"replicaset":     {action: ActionEvict},
			},
		},
		{
			name: "completed pods are skipped",
			pods: []corev1.Pod{pod("done", phase(corev1.PodSucceeded)), pod("failed", phase(corev1.PodFailed))},
			want: map[string]want{
				"done":   {action: ActionSkip, reason: "completed (Succeeded)"},
				"failed": {action: ActionSkip, reason: "completed (Failed)"},
			},
		},
		{
			name: "a deleting pod is waited for, not evicted again",
			pods: []corev1.Pod{pod("going", deletingSince(time.Hour))},
			want: map[string]want{"going": {action: ActionWaitDeleted}},
		},
		{
			name:  "on an unreachable node a pod deleting for over a second is skipped",
			pods:  []corev1.Pod{pod("stuck", deletingSince(2*time.Second)), pod("fresh", deletingSince(500*time.Millisecond)), pod("running")},
			state: State{NodeUnreachable: true},
			want: map[string]want{
				"stuck":   {action: ActionSkip, reason: "deleting on an unreachable node"},
				"fresh":   {action: ActionWaitDeleted},
				"running": {action: ActionEvict},
			},
		},
		{
			name: "drain label skip, in any case",
			pods: []corev1.Pod{pod("lower", withLabel(PodDrainLabel, "skip")), pod("upper", withLabel(PodDrainLabel, "Skip"))},
			want: map[string]want{
				"lower": {action: ActionSkip, reason: "label cluster.x-k8s.io/drain=skip"},
				"upper": {action: ActionSkip, reason: "label cluster.x-k8s.io/drain=Skip"},
			},
		},
		{
			name: "drain label wait-completed waits, unless already deleting",
			pods: []corev1.Pod{
				pod("job", withLabel(PodDrainLabel, "wait-completed")),
				pod("job2", withLabel(PodDrainLabel, "WaitCompleted")),
				pod("job-going", withLabel(PodDrainLabel, "wait-completed"), deletingSince(time.Minute)),
				pod("job-done", withLabel(PodDrainLabel, "wait-completed"), phase(corev1.PodSucceeded)),
			},
			want: map[string]want{
				"job":       {action: ActionWaitCompleted, reason: "label cluster.x-k8s.io/drain=wait-completed"},
				"job2":      {action: ActionWaitCompleted},
				"job-going": {action: ActionWaitDeleted},
				"job-done":  {action: ActionSkip},
			},
		},
		{
			name: "unknown drain label value is ignored",
			pods: []corev1.Pod{pod("odd", withLabel(PodDrainLabel, "later"))},
			want: map[string]want{"odd": {action: ActionEvict}},
		},
		{
			name:   "skip selector",
			pods:   []corev1.Pod{pod("agent", withLabel("app", "monitoring")), pod("web", withLabel("app", "web"))},
			policy: Policy{SkipSelector: selector("app=monitoring")},
			want: map[string]want{
				"agent": {action: ActionSkip, reason: "matches the skip selector"},
				"web":   {action: ActionEvict},
			},
		},
		{
			name: "built-in skips and the drain label take precedence over rules",
			pods: []corev1.Pod{
				pod("static", mirror),
				pod("labelled", withLabel(PodDrainLabel, "skip")),
				pod("waiter", withLabel(PodDrainLabel, "wait-completed")),
			},
			policy: Policy{Rules: []Rule{{Name: "all", Behavior: BehaviorDrain, Order: 7}}},
			want: map[string]want{
				"static":   {action: ActionSkip, reason: "mirror pod"},
				"labelled": {action: ActionSkip},
				"waiter":   {action: ActionWaitCompleted, order: 0},
			},
		},
		{
			name: "first matching rule wins, by pod and by namespace labels",
			pods: []corev1.Pod{
				pod("osd", withLabel("app", "ceph-osd")),
				pod("sys", inNamespace("kube-system")),
				pod("web", withLabel("app", "web")),
			},
			state: State{NamespaceLabels: map[string]map[string]string{
				"apps":        {"kubernetes.io/metadata.name": "apps"},
				"kube-system": {"kubernetes.io/metadata.name": "kube-system"},
			}},
			policy: Policy{Rules: []Rule{
				{Name: "skip-system", Behavior: BehaviorSkip, Namespaces: selector("kubernetes.io/metadata.name=kube-system")},
				{Name: "osd-wait", Behavior: BehaviorWaitCompleted, Pods: selector("app=ceph-osd")},
				{Name: "osd-last", Behavior: BehaviorDrain, Order: 100, Pods: selector("app=ceph-osd")},
			}},
			want: map[string]want{
				"osd": {action: ActionWaitCompleted, reason: "MachineDrainRule osd-wait"},
				"sys": {action: ActionSkip, reason: "MachineDrainRule skip-system"},
				"web": {action: ActionEvict, reason: ""},
			},
		},
		{
			name: "pods are evicted in batches, lowest order first",
			pods: []corev1.Pod{
				pod("first", withLabel("tier", "front")),
				pod("default"),
				pod("last", withLabel("tier", "storage")),
			},
			policy: Policy{Rules: []Rule{
				{Name: "front-first", Behavior: BehaviorDrain, Order: -10, Pods: selector("tier=front")},
				{Name: "storage-last", Behavior: BehaviorDrain, Order: 100, Pods: selector("tier=storage")},
			}},
			want: map[string]want{
				"first":   {action: ActionEvict, order: -10, reason: "MachineDrainRule front-first"},
				"default": {action: ActionDefer, order: 0},
				"last":    {action: ActionDefer, order: 100, reason: "MachineDrainRule storage-last"},
			},
		},
		{
			name: "a terminating pod of a lower order holds the next batch back",
			pods: []corev1.Pod{
				pod("first", withLabel("tier", "front"), deletingSince(time.Second)),
				pod("default"),
			},
			policy: Policy{Rules: []Rule{{Name: "front-first", Behavior: BehaviorDrain, Order: -10, Pods: selector("tier=front")}}},
			want: map[string]want{
				"first":   {action: ActionWaitDeleted, order: -10},
				"default": {action: ActionDefer},
			},
		},
		{
			name: "waiting for completion belongs to order 0; skipped pods hold nothing back",
			pods: []corev1.Pod{
				pod("job", withLabel(PodDrainLabel, "wait-completed")),
				pod("late", withLabel("tier", "storage")),
				pod("early-done", withLabel("tier", "front"), phase(corev1.PodSucceeded)),
			},
			policy: Policy{Rules: []Rule{
				{Name: "front-first", Behavior: BehaviorDrain, Order: -10, Pods: selector("tier=front")},
				{Name: "storage-last", Behavior: BehaviorDrain, Order: 5, Pods: selector("tier=storage")},
			}},
			want: map[string]want{
				"job":        {action: ActionWaitCompleted, order: 0},
				"late":       {action: ActionDefer, order: 5},
				"early-done": {action: ActionSkip},
			},
		},
		{
			name: "a WaitCompleted rule's order is ignored",
			pods: []corev1.Pod{pod("batch", withLabel("app", "batch")), pod("web")},
			policy: Policy{Rules: []Rule{
				{Name: "batch", Behavior: BehaviorWaitCompleted, Order: 50, Pods: selector("app=batch")},
			}},
			want: map[string]want{
				"batch": {action: ActionWaitCompleted, order: 0},
				"web":   {action: ActionEvict},
			},
		},
		{
			name: "no pods",
			want: map[string]want{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.state
			s.Pods, s.Now = tt.pods, now
			got := Classify(s, tt.policy)
			if len(got) != len(tt.want) {
				t.Fatalf("got %d decisions, want %d: %+v", len(got), len(tt.want), got)
			}
			for _, d := range got {
				w, ok := tt.want[d.Pod.Name]
				if !ok {
					t.Errorf("unexpected decision for %s", d.Pod.Name)
					continue
				}
				if d.Action != w.action {
					t.Errorf("%s: action %s (%q), want %s", d.Pod.Name, d.Action, d.Reason, w.action)
				}
				if d.Action != ActionSkip && d.Order != w.order {
					t.Errorf("%s: order %d, want %d", d.Pod.Name, d.Order, w.order)
				}
				if w.reason != "" && d.Reason != w.reason {
					t.Errorf("%s: reason %q, want %q", d.Pod.Name, d.Reason, w.reason)
				}
			}
		})
	}
}

func TestClassifySortsByNamespaceAndName(t *testing.T) {
	pods := []corev1.Pod{pod("b", inNamespace("y")), pod("a", inNamespace("z")), pod("c", inNamespace("y")), pod("a", inNamespace("x"))}
	var got []string
	for _, d := range Classify(State{Pods: pods, Now: now}, Policy{}) {
		got = append(got, d.Key().String())
	}
	if want := "x/a y/b y/c z/a"; strings.Join(got, " ") != want {
		t.Errorf("order %v, want %s", got, want)
	}
}

func TestClassifyPointsIntoState(t *testing.T) {
	pods := []corev1.Pod{pod("a")}
	d := Classify(State{Pods: pods, Now: now}, Policy{})
	if d[0].Pod != &pods[0] {
		t.Errorf("decision does not point at the observed pod")
	}
}
