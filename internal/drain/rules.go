package drain

import (
	"errors"
	"fmt"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

// RulesForMachine turns the MachineDrainRules of a Machine's namespace into
// the Rules a drain of that Machine's Node follows, without any I/O.
//
// A MachineDrainRule applies to the Machine when it lists no machines, or
// when one of its entries matches both the Machine's labels (selector) and
// its Cluster's labels (clusterSelector). The rules that apply come back
// sorted by name, because the first rule that selects a Pod decides and the
// order of a list from the API server means nothing; a rule with several
// pods entries becomes several Rules of the same name, one per entry.
//
// A selector that cannot be evaluated is an error naming the rule, the field
// and the fix, and no Rules come back: draining without a rule the user
// wrote could evict Pods the rule meant to keep. Every rule of the namespace
// is checked, not only those that apply, since a broken machines selector
// cannot tell whether its rule applies.
func RulesForMachine(rules []clusterv1.MachineDrainRule, machineLabels, clusterLabels map[string]string) ([]Rule, error) {
	sorted := make([]*clusterv1.MachineDrainRule, len(rules))
	for i := range rules {
		sorted[i] = &rules[i]
	}
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })

	var out []Rule
	var errs []error
	for _, mdr := range sorted {
		applies, podRules, err := compileRule(mdr, machineLabels, clusterLabels)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if applies {
			out = append(out, podRules...)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// compileRule converts every selector of one MachineDrainRule, tells whether
// it applies to the Machine, and returns its Rules.
func compileRule(mdr *clusterv1.MachineDrainRule, machineLabels, clusterLabels map[string]string) (bool, []Rule, error) {
	var errs []error
	convert := func(field string, ls *metav1.LabelSelector) labels.Selector {
		sel, err := selectorOf(ls)
		if err != nil {
			errs = append(errs, fmt.Errorf("MachineDrainRule %s: %s is not a valid label selector (%v): fix or remove it", mdr.Name, field, err))
		}
		return sel
	}

	applies := len(mdr.Spec.Machines) == 0
	for i, m := range mdr.Spec.Machines {
		machines := convert(fmt.Sprintf("spec.machines[%d].selector", i), m.Selector)
		clusters := convert(fmt.Sprintf("spec.machines[%d].clusterSelector", i), m.ClusterSelector)
		if matches(machines, machineLabels) && matches(clusters, clusterLabels) {
			applies = true
		}
	}

	base := Rule{
		Name:     mdr.Name,
		Behavior: Behavior(mdr.Spec.Drain.Behavior),
		Order:    ptr.Deref(mdr.Spec.Drain.Order, 0),
	}
	var out []Rule
	if len(mdr.Spec.Pods) == 0 {
		out = append(out, base)
	}
	for i, p := range mdr.Spec.Pods {
		r := base
		r.Pods = convert(fmt.Sprintf("spec.pods[%d].selector", i), p.Selector)
		r.Namespaces = convert(fmt.Sprintf("spec.pods[%d].namespaceSelector", i), p.NamespaceSelector)
		out = append(out, r)
	}
	if len(errs) > 0 {
		return false, nil, errors.Join(errs...)
	}
	return applies, out, nil
}

// selectorOf converts an API label selector; a missing one is nil (every
// object), as is an empty one.
func selectorOf(ls *metav1.LabelSelector) (labels.Selector, error) {
	if ls == nil || (len(ls.MatchLabels) == 0 && len(ls.MatchExpressions) == 0) {
		return nil, nil
	}
	return metav1.LabelSelectorAsSelector(ls)
}

func matches(sel labels.Selector, set map[string]string) bool {
	return sel == nil || sel.Matches(labels.Set(set))
}
