package drain

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

// Result is the outcome of one Drain pass. Pod lists are sorted by namespace
// and name.
type Result struct {
	// Node is the drained node's name.
	Node string
	// NodeNotFound: the node does not exist, so there is nothing to drain.
	NodeNotFound bool
	// Evicted are the pods whose eviction the API server accepted in this
	// pass; they are terminating now.
	Evicted []types.NamespacedName
	// Blocked are the pods whose eviction was refused (by a
	// PodDisruptionBudget) or failed; the next pass tries again.
	Blocked []Blocked
	// Terminating are the pods that were already being deleted.
	Terminating []types.NamespacedName
	// WaitingCompletion are the pods the drain waits for without evicting
	// them (PodDrainLabelWaitCompleted or a WaitCompleted rule).
	WaitingCompletion []types.NamespacedName
	// Deferred are pods of a higher drain order, evicted once the current
	// batch is gone.
	Deferred []types.NamespacedName
	// Skipped are the pods the drain leaves alone, and why.
	Skipped []Skipped
	// Why says, for a pod waiting to complete or deferred, what put it
	// there: the label or MachineDrainRule, and for a deferred pod its
	// order. Details groups the pods by it.
	Why map[types.NamespacedName]string
}

func (r *Result) explain(pod types.NamespacedName, why string) {
	if why == "" {
		return
	}
	if r.Why == nil {
		r.Why = map[types.NamespacedName]string{}
	}
	r.Why[pod] = why
}

// Blocked is a pod whose eviction did not go through.
type Blocked struct {
	Pod types.NamespacedName
	// ByBudget: a PodDisruptionBudget refused the eviction.
	ByBudget bool
	// Budget names that PodDisruptionBudget when it is known.
	Budget string
	// Message is the API server's explanation.
	Message string
}

// Skipped is a pod the drain leaves alone.
type Skipped struct {
	Pod    types.NamespacedName
	Reason string
}

// Done reports that nothing on the node holds the drain up any more: every
// pod is gone or skipped. A pass that evicted pods is never done; the next
// pass sees whether they have gone.
func (r Result) Done() bool {
	return len(r.Evicted)+len(r.Blocked)+len(r.Terminating)+len(r.WaitingCompletion)+len(r.Deferred) == 0
}

// maxMessageDetail bounds the API server text quoted in Message.
const maxMessageDetail = 120

// Message is a one-line summary for the Machine's Deleting condition, such as
// "draining node n1: 2 pods evicted, 1 blocked by PodDisruptionBudget
// web-pdb, 1 terminating" or "node n1 drained (3 pods skipped)".
func (r Result) Message() string {
	if r.NodeNotFound {
		return fmt.Sprintf("node %s not found, nothing to drain", r.Node)
	}
	if r.Done() {
		if n := len(r.Skipped); n > 0 {
			return fmt.Sprintf("node %s drained (%s skipped)", r.Node, pods(n))
		}
		return fmt.Sprintf("node %s drained", r.Node)
	}

	var parts []string
	add := func(n int, what string) {
		if n == 0 {
			return
		}
		if len(parts) == 0 {
			parts = append(parts, pods(n)+" "+what)
		} else {
			parts = append(parts, fmt.Sprintf("%d %s", n, what))
		}
	}
	add(len(r.Evicted), "evicted")

	var byBudget, unnamedBudget int
	budgets := map[string]bool{}
	var failed []Blocked
	for _, b := range r.Blocked {
		switch {
		case b.ByBudget && b.Budget != "":
			byBudget++
			budgets[b.Budget] = true
		case b.ByBudget:
			unnamedBudget++
		default:
			failed = append(failed, b)
		}
	}
	if byBudget > 0 {
		names := sortedKeys(budgets)
		noun := "PodDisruptionBudget"
		if len(names) > 1 {
			noun += "s"
		}
		add(byBudget, "blocked by "+noun+" "+andList(names))
	}
	add(unnamedBudget, "blocked by a PodDisruptionBudget")
	if len(failed) > 0 {
		add(len(failed), "could not be evicted: "+truncate(failed[0].Message, maxMessageDetail))
	}
	add(len(r.Terminating), "terminating")
	add(len(r.WaitingCompletion), "waiting to complete")
	add(len(r.Deferred), "waiting for a lower drain order")
	return fmt.Sprintf("draining node %s: %s", r.Node, strings.Join(parts, ", "))
}

// maxDetailPods bounds the pods named on one line of Details.
const maxDetailPods = 5

// maxDetailGroups bounds the lines of one kind in Details (one per refusal
// message, rule or label), so that the Deleting condition stays far below
// the API's limit on a condition message however many budgets and rules
// there are.
const maxDetailGroups = 5

// Details lists, one category a line, the pods behind Message, naming at most
// a few pods a line; it is empty when there is nothing to wait for.
func (r Result) Details() string {
	if r.Done() {
		return ""
	}
	var lines []string
	line := func(what string, names []string) {
		if len(names) > 0 {
			lines = append(lines, "* "+what+": "+list(names))
		}
	}
	line("Pods evicted", keys(r.Evicted))
	lineGroups := func(what string, groups []podGroup) {
		for i, g := range groups {
			if i == maxDetailGroups {
				n := 0
				for _, rest := range groups[i:] {
					n += len(rest.pods)
				}
				lines = append(lines, fmt.Sprintf("* %s: %s more, for other reasons", what, pods(n)))
				return
			}
			line(what+g.why, g.pods)
		}
	}
	// Refusals are grouped by the API server's message, which names the
	// PodDisruptionBudget and its numbers.
	blocked := make([]types.NamespacedName, len(r.Blocked))
	refusal := map[types.NamespacedName]string{}
	for i, b := range r.Blocked {
		blocked[i] = b.Pod
		refusal[b.Pod] = truncate(b.Message, maxMessageDetail)
	}
	lineGroups("Pods not evicted", groupBy(blocked, refusal))
	line("Pods terminating", keys(r.Terminating))
	lineGroups("Pods waiting to complete", groupBy(r.WaitingCompletion, r.Why))
	lineGroups("Pods waiting for a lower drain order", groupBy(r.Deferred, r.Why))
	return strings.Join(lines, "\n")
}

type podGroup struct {
	why  string // " (reason)", or "" for pods without one
	pods []string
}

// groupBy groups pods by their entry in reasons: the pods without one
// first, then one group per reason, in the order of the reasons.
func groupBy(refs []types.NamespacedName, reasons map[types.NamespacedName]string) []podGroup {
	grouped := map[string][]string{}
	for _, ref := range refs {
		why := ""
		if w := reasons[ref]; w != "" {
			why = " (" + w + ")"
		}
		grouped[why] = append(grouped[why], ref.String())
	}
	out := make([]podGroup, 0, len(grouped))
	for _, why := range sortedKeys(grouped) {
		out = append(out, podGroup{why: why, pods: grouped[why]})
	}
	return out
}

// andList joins names as "a", "a and b", "a, b and c".
func andList(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

func pods(n int) string {
	if n == 1 {
		return "1 pod"
	}
	return fmt.Sprintf("%d pods", n)
}

func keys(refs []types.NamespacedName) []string {
	out := make([]string, len(refs))
	for i, r := range refs {
		out[i] = r.String()
	}
	return out
}

func list(names []string) string {
	if len(names) <= maxDetailPods {
		return strings.Join(names, ", ")
	}
	return strings.Join(names[:maxDetailPods], ", ") + fmt.Sprintf(", … (%d more)", len(names)-maxDetailPods)
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8Start(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }
