package plan

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

// NodeTaintsInput is what the taint decision needs of a Machine's Node.
type NodeTaintsInput struct {
	// Current are the Node's taints as read.
	Current []corev1.Taint
	// Tracked is the value of the Node's cluster.x-k8s.io/taints-from-machine
	// annotation: the taints ("key:effect", comma separated) Capstan put
	// there to keep in sync.
	Tracked string
	// Initialized is whether the Node has that annotation at all. Until it
	// has, the Node has never been synced, and the OnInitialization taints
	// are due.
	Initialized bool
	// Want are the Machine's spec.taints.
	Want []clusterv1.MachineTaint
}

// NodeTaintsPlan is the decision: the Node's taints and tracking annotation
// after the sync, and whether either differs from what the Node has.
type NodeTaintsPlan struct {
	Taints  []corev1.Taint
	Tracked string
	Changed bool
}

// NodeTaints decides which taints a Machine's Node carries, the way upstream
// Cluster API propagates a Machine's spec.taints:
//
//   - an Always taint is added when missing, its value corrected when it
//     differs, and it is tracked; so it comes back when someone removes it;
//   - an OnInitialization taint is added only at the first sync (the Node
//     has no tracking annotation yet) and never tracked, so it may be
//     removed from the Node for good;
//   - a tracked taint the Machine no longer lists is removed, unless the
//     Machine still lists it as OnInitialization: turning Always into
//     OnInitialization leaves the taint on the Node, untracked;
//   - every other taint (the node lifecycle controller's, an admin's) is
//     left as it is, in its place.
//
// A taint is identified by key and effect, as on a Node. The tracking
// annotation lists the Always taints, sorted.
func NodeTaints(in NodeTaintsInput) NodeTaintsPlan {
	id := func(key string, effect corev1.TaintEffect) string { return key + ":" + string(effect) }

	out := NodeTaintsPlan{Taints: slices.Clone(in.Current)}
	var always []string
	onInitialization := map[string]bool{}
	for _, t := range in.Want {
		if t.Propagation == clusterv1.MachineTaintPropagationOnInitialization {
			onInitialization[id(t.Key, t.Effect)] = true
			if in.Initialized {
				continue
			}
		} else {
			always = append(always, id(t.Key, t.Effect))
		}
		out.Changed = ensureTaint(&out.Taints, corev1.Taint{Key: t.Key, Value: t.Value, Effect: t.Effect}) || out.Changed
	}

	keep := map[string]bool{}
	for _, a := range always {
		keep[a] = true
	}
	drop := map[string]bool{}
	if in.Tracked != "" {
		for _, tracked := range strings.Split(in.Tracked, ",") {
			if !keep[tracked] && !onInitialization[tracked] {
				drop[tracked] = true
			}
		}
	}
	if len(drop) > 0 {
		out.Taints = slices.DeleteFunc(out.Taints, func(t corev1.Taint) bool {
			if drop[id(t.Key, t.Effect)] {
				out.Changed = true
				return true
			}
			return false
		})
	}

	slices.Sort(always)
	out.Tracked = strings.Join(slices.Compact(always), ",")
	if !in.Initialized || out.Tracked != in.Tracked {
		out.Changed = true
	}
	return out
}

// ensureTaint puts taint on the list, replacing the value of one with the
// same key and effect; it reports whether the list changed.
func ensureTaint(taints *[]corev1.Taint, taint corev1.Taint) bool {
	for i, t := range *taints {
		if t.Key != taint.Key || t.Effect != taint.Effect {
			continue
		}
		if t.Value == taint.Value {
			return false
		}
		(*taints)[i].Value = taint.Value
		return true
	}
	*taints = append(*taints, taint)
	return true
}
