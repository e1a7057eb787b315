package plan

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

func TestNodeTaints(t *testing.T) {
	const (
		noSchedule = corev1.TaintEffectNoSchedule
		noExecute  = corev1.TaintEffectNoExecute
		always     = clusterv1.MachineTaintPropagationAlways
		once       = clusterv1.MachineTaintPropagationOnInitialization
	)
	taint := func(key, value string, effect corev1.TaintEffect) corev1.Taint {
		return corev1.Taint{Key: key, Value: value, Effect: effect}
	}
	want := func(key, value string, effect corev1.TaintEffect, p clusterv1.MachineTaintPropagation) clusterv1.MachineTaint {
		return clusterv1.MachineTaint{Key: key, Value: value, Effect: effect, Propagation: p}
	}
	notReady := taint(corev1.TaintNodeNotReady, "", noSchedule)
	admin := taint("admin.example.com/keep", "", noSchedule)

	tests := []struct {
		name string
		in   NodeTaintsInput
		out  NodeTaintsPlan
	}{
		{
			name: "first sync adds both kinds and tracks only Always; others' taints stay in place",
			in: NodeTaintsInput{
				Current: []corev1.Taint{notReady, admin},
				Want:    []clusterv1.MachineTaint{want("gpu", "yes", noSchedule, always), want("warm-up", "", noExecute, once)},
			},
			out: NodeTaintsPlan{
				Taints:  []corev1.Taint{notReady, admin, taint("gpu", "yes", noSchedule), taint("warm-up", "", noExecute)},
				Tracked: "gpu:NoSchedule", Changed: true,
			},
		},
		{
			name: "a Node with nothing to do is not changed",
			in: NodeTaintsInput{
				Current: []corev1.Taint{admin, taint("gpu", "yes", noSchedule)}, Tracked: "gpu:NoSchedule", Initialized: true,
				Want: []clusterv1.MachineTaint{want("gpu", "yes", noSchedule, always), want("warm-up", "", noExecute, once)},
			},
			out: NodeTaintsPlan{Taints: []corev1.Taint{admin, taint("gpu", "yes", noSchedule)}, Tracked: "gpu:NoSchedule"},
		},
		{
			name: "the first sync of a Machine without taints still marks the Node initialized",
			in:   NodeTaintsInput{Current: []corev1.Taint{admin}},
			out:  NodeTaintsPlan{Taints: []corev1.Taint{admin}, Tracked: "", Changed: true},
		},
		{
			name: "an Always taint removed from the Node comes back; an OnInitialization one does not",
			in: NodeTaintsInput{
				Current: []corev1.Taint{admin}, Tracked: "gpu:NoSchedule", Initialized: true,
				Want: []clusterv1.MachineTaint{want("gpu", "yes", noSchedule, always), want("warm-up", "", noExecute, once)},
			},
			out: NodeTaintsPlan{Taints: []corev1.Taint{admin, taint("gpu", "yes", noSchedule)}, Tracked: "gpu:NoSchedule", Changed: true},
		},
		{
			name: "an Always taint's value is corrected in place",
			in: NodeTaintsInput{
				Current: []corev1.Taint{taint("gpu", "no", noSchedule), admin}, Tracked: "gpu:NoSchedule", Initialized: true,
				Want: []clusterv1.MachineTaint{want("gpu", "yes", noSchedule, always)},
			},
			out: NodeTaintsPlan{Taints: []corev1.Taint{taint("gpu", "yes", noSchedule), admin}, Tracked: "gpu:NoSchedule", Changed: true},
		},
		{
			name: "a tracked taint dropped from the Machine is removed; an untracked one of the same key but another effect stays",
			in: NodeTaintsInput{
				Current: []corev1.Taint{taint("gpu", "yes", noSchedule), taint("gpu", "yes", noExecute)}, Tracked: "gpu:NoSchedule", Initialized: true,
			},
			out: NodeTaintsPlan{Taints: []corev1.Taint{taint("gpu", "yes", noExecute)}, Tracked: "", Changed: true},
		},
		{
			name: "Always turned OnInitialization stays on the Node, untracked",
			in: NodeTaintsInput{
				Current: []corev1.Taint{taint("gpu", "yes", noSchedule)}, Tracked: "gpu:NoSchedule", Initialized: true,
				Want: []clusterv1.MachineTaint{want("gpu", "yes", noSchedule, once)},
			},
			out: NodeTaintsPlan{Taints: []corev1.Taint{taint("gpu", "yes", noSchedule)}, Tracked: "", Changed: true},
		},
		{
			name: "OnInitialization turned Always is added and tracked",
			in: NodeTaintsInput{
				Current: []corev1.Taint{admin}, Tracked: "", Initialized: true,
				Want: []clusterv1.MachineTaint{want("warm-up", "", noExecute, always)},
			},
			out: NodeTaintsPlan{Taints: []corev1.Taint{admin, taint("warm-up", "", noExecute)}, Tracked: "warm-up:NoExecute", Changed: true},
		},
		{
			name: "an OnInitialization taint removed from the Machine stays on the Node",
			in: NodeTaintsInput{
				Current: []corev1.Taint{taint("warm-up", "", noExecute)}, Tracked: "", Initialized: true,
			},
			out: NodeTaintsPlan{Taints: []corev1.Taint{taint("warm-up", "", noExecute)}, Tracked: ""},
		},
		{
			name: "the tracking annotation is sorted and taints an admin set first are taken over",
			in: NodeTaintsInput{
				Current: []corev1.Taint{taint("b", "", noSchedule)}, Initialized: true,
				Want: []clusterv1.MachineTaint{want("b", "", noSchedule, always), want("a", "", noSchedule, always)},
			},
			out: NodeTaintsPlan{Taints: []corev1.Taint{taint("b", "", noSchedule), taint("a", "", noSchedule)}, Tracked: "a:NoSchedule,b:NoSchedule", Changed: true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := append([]corev1.Taint(nil), tt.in.Current...)
			got := NodeTaints(tt.in)
			if !reflect.DeepEqual(got, tt.out) {
				t.Errorf("NodeTaints()\n got %+v\nwant %+v", got, tt.out)
			}
			if !reflect.DeepEqual(before, tt.in.Current) {
				t.Errorf("the input taints were modified: %+v", tt.in.Current)
			}
		})
	}
}
