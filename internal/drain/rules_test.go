package drain

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

func drainRule(name string, behavior clusterv1.MachineDrainRuleDrainBehavior, order *int32, opts ...func(*clusterv1.MachineDrainRule)) clusterv1.MachineDrainRule {
	r := clusterv1.MachineDrainRule{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec:       clusterv1.MachineDrainRuleSpec{Drain: clusterv1.MachineDrainRuleDrainConfig{Behavior: behavior, Order: order}},
	}
	for _, o := range opts {
		o(&r)
	}
	return r
}

func labelSelector(kv ...string) *metav1.LabelSelector {
	ls := &metav1.LabelSelector{MatchLabels: map[string]string{}}
	for i := 0; i+1 < len(kv); i += 2 {
		ls.MatchLabels[kv[i]] = kv[i+1]
	}
	return ls
}

func forMachines(sel ...clusterv1.MachineDrainRuleMachineSelector) func(*clusterv1.MachineDrainRule) {
	return func(r *clusterv1.MachineDrainRule) { r.Spec.Machines = append(r.Spec.Machines, sel...) }
}

func forPods(sel ...clusterv1.MachineDrainRulePodSelector) func(*clusterv1.MachineDrainRule) {
	return func(r *clusterv1.MachineDrainRule) { r.Spec.Pods = append(r.Spec.Pods, sel...) }
}

func TestRulesForMachine(t *testing.T) {
	machine := map[string]string{"pool": "gpu", "os": "linux"}
	cluster := map[string]string{"stage": "production"}

	// Each case checks the compiled rules by what Classify then decides for
	// a set of pods, which is what the rules are for.
	type want struct {
		action Action
		order  int32
		reason string
	}
	tests := []struct {
		name    string
		rules   []clusterv1.MachineDrainRule
		pods    []string // "name" or "name:k=v"; namespaces: "apps", labelled team=apps
		want    map[string]want
		wantErr []string // fragments of the error; nil means no error
		count   int      // Rules expected, when the error is nil
	}{
		{
			name:  "no rules drains everything at order 0",
			pods:  []string{"web"},
			want:  map[string]want{"web": {ActionEvict, 0, ""}},
			count: 0,
		},
		{
			name: "a rule without machines applies to every Machine; without pods to every Pod",
			rules: []clusterv1.MachineDrainRule{
				drainRule("skip-everything", clusterv1.MachineDrainRuleDrainBehaviorSkip, nil),
			},
			pods:  []string{"web"},
			want:  map[string]want{"web": {ActionSkip, 0, "MachineDrainRule skip-everything"}},
			count: 1,
		},
		{
			name: "rules are tried by name, not in list order: the first by name that selects a Pod decides",
			rules: []clusterv1.MachineDrainRule{
				drainRule("zz-drain-late", clusterv1.MachineDrainRuleDrainBehaviorDrain, ptr.To[int32](10)),
				drainRule("aa-wait-batch", clusterv1.MachineDrainRuleDrainBehaviorWaitCompleted, nil, forPods(clusterv1.MachineDrainRulePodSelector{Selector: labelSelector("app", "batch")})),
			},
			pods: []string{"job:app=batch", "web"},
			want: map[string]want{
				"job": {ActionWaitCompleted, 0, "MachineDrainRule aa-wait-batch"},
				"web": {ActionDefer, 10, "MachineDrainRule zz-drain-late"},
			},
			count: 2,
		},
		{
			name: "selector and clusterSelector must both match",
			rules: []clusterv1.MachineDrainRule{
				drainRule("staging-gpu", clusterv1.MachineDrainRuleDrainBehaviorSkip, nil, forMachines(clusterv1.MachineDrainRuleMachineSelector{
					Selector: labelSelector("pool", "gpu"), ClusterSelector: labelSelector("stage", "staging"),
				})),
			},
			pods:  []string{"web"},
			want:  map[string]want{"web": {ActionEvict, 0, ""}},
			count: 0,
		},
		{
			name: "machines entries are alternatives: one matching entry is enough",
			rules: []clusterv1.MachineDrainRule{
				drainRule("gpu-or-windows", clusterv1.MachineDrainRuleDrainBehaviorSkip, nil, forMachines(
					clusterv1.MachineDrainRuleMachineSelector{Selector: labelSelector("os", "windows")},
					clusterv1.MachineDrainRuleMachineSelector{Selector: labelSelector("pool", "gpu"), ClusterSelector: labelSelector("stage", "production")},
				)),
			},
			pods:  []string{"web"},
			want:  map[string]want{"web": {ActionSkip, 0, "MachineDrainRule gpu-or-windows"}},
			count: 1,
		},
		{
			name: "an empty selector matches every Machine",
			rules: []clusterv1.MachineDrainRule{
				drainRule("any", clusterv1.MachineDrainRuleDrainBehaviorDrain, ptr.To[int32](-5), forMachines(clusterv1.MachineDrainRuleMachineSelector{Selector: &metav1.LabelSelector{}})),
			},
			pods:  []string{"web"},
			want:  map[string]want{"web": {ActionEvict, -5, "MachineDrainRule any"}},
			count: 1,
		},
		{
			name: "a rule that matches no Machine label is left out",
			rules: []clusterv1.MachineDrainRule{
				drainRule("windows-only", clusterv1.MachineDrainRuleDrainBehaviorSkip, nil, forMachines(clusterv1.MachineDrainRuleMachineSelector{
					Selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "os", Operator: metav1.LabelSelectorOpIn, Values: []string{"windows"}}}},
				})),
			},
			pods:  []string{"web"},
			want:  map[string]want{"web": {ActionEvict, 0, ""}},
			count: 0,
		},
		{
			name: "each pods entry becomes a Rule; pod and namespace selectors must both match",
			rules: []clusterv1.MachineDrainRule{
				drainRule("monitoring-last", clusterv1.MachineDrainRuleDrainBehaviorDrain, ptr.To[int32](100), forPods(
					clusterv1.MachineDrainRulePodSelector{Selector: labelSelector("app", "logging")},
					clusterv1.MachineDrainRulePodSelector{Selector: labelSelector("app", "prometheus"), NamespaceSelector: labelSelector("team", "monitoring")},
				)),
			},
			pods: []string{"fluent:app=logging", "prom:app=prometheus", "web"},
			want: map[string]want{
				"fluent": {ActionDefer, 100, "MachineDrainRule monitoring-last"},
				"prom":   {ActionEvict, 0, ""}, // its namespace is team=apps
				"web":    {ActionEvict, 0, ""},
			},
			count: 2,
		},
		{
			name: "the pod label wins over every rule",
			rules: []clusterv1.MachineDrainRule{
				drainRule("drain-all", clusterv1.MachineDrainRuleDrainBehaviorDrain, nil),
			},
			pods: []string{"keep:cluster.x-k8s.io/drain=skip", "job:cluster.x-k8s.io/drain=WaitCompleted", "web"},
			want: map[string]want{
				"keep": {ActionSkip, 0, "label cluster.x-k8s.io/drain=skip"},
				"job":  {ActionWaitCompleted, 0, "label cluster.x-k8s.io/drain=WaitCompleted"},
				"web":  {ActionEvict, 0, "MachineDrainRule drain-all"},
			},
			count: 1,
		},
		{
			name: "an invalid selector, even of a rule that would not apply, stops the drain and names the rule, the field and the fix",
			rules: []clusterv1.MachineDrainRule{
				drainRule("fine", clusterv1.MachineDrainRuleDrainBehaviorSkip, nil),
				drainRule("broken", clusterv1.MachineDrainRuleDrainBehaviorSkip, nil,
					forMachines(clusterv1.MachineDrainRuleMachineSelector{Selector: labelSelector("os", "windows")}),
					forPods(clusterv1.MachineDrainRulePodSelector{NamespaceSelector: &metav1.LabelSelector{
						MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: "Equals", Values: []string{"x"}}},
					}})),
			},
			wantErr: []string{"MachineDrainRule broken", "spec.pods[0].namespaceSelector", "fix or remove it"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rules, err := RulesForMachine(tt.rules, machine, cluster)
			if tt.wantErr != nil {
				if err == nil {
					t.Fatalf("no error, %d rules; want an error", len(rules))
				}
				for _, frag := range tt.wantErr {
					if !strings.Contains(err.Error(), frag) {
						t.Errorf("error %q does not mention %q", err, frag)
					}
				}
				if rules != nil {
					t.Errorf("rules %v returned with the error; want none", rules)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(rules) != tt.count {
				t.Errorf("%d rules, want %d: %+v", len(rules), tt.count, rules)
			}
			state := State{NamespaceLabels: map[string]map[string]string{"apps": {"team": "apps"}}}
			for _, spec := range tt.pods {
				name, kv, _ := strings.Cut(spec, ":")
				var opts []podOpt
				if k, v, ok := strings.Cut(kv, "="); ok {
					opts = append(opts, withLabel(k, v))
				}
				state.Pods = append(state.Pods, pod(name, opts...))
			}
			for _, d := range Classify(state, Policy{Rules: rules}) {
				w := tt.want[d.Pod.Name]
				if d.Action != w.action || d.Order != w.order || d.Reason != w.reason {
					t.Errorf("%s: %s order %d (%q), want %s order %d (%q)", d.Pod.Name, d.Action, d.Order, d.Reason, w.action, w.order, w.reason)
				}
			}
		})
	}
}
