package bench

import (
	"fmt"
	"sort"

	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	scalebench "capstan.dev/capstan/internal/bench"
)

// top lists the largest entries, for "what dominates".
func top(r scalebench.RequestCounts, n int) []string {
	keys := make([]string, 0, len(r.ByVerbResource))
	for k := range r.ByVerbResource {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return r.ByVerbResource[keys[i]] > r.ByVerbResource[keys[j]] })
	if len(keys) > n {
		keys = keys[:n]
	}
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = fmt.Sprintf("%s=%.0f", k, r.ByVerbResource[k])
	}
	return out
}

// reconciles reads controller-runtime's reconcile counter per controller.
func reconciles() (map[string]float64, error) {
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" {
					out[l.GetValue()] += m.GetCounter().GetValue()
				}
			}
		}
	}
	return out, nil
}
