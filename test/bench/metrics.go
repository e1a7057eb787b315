package bench

import (
	"context"
	"fmt"
	"sort"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// requestCounts are API server requests keyed by "verb resource", with 409s
// counted apart.
type requestCounts struct {
	byVerbResource map[string]float64
	conflicts      float64
}

// scrapeRequests reads apiserver_request_total from the API server.
func scrapeRequests(ctx context.Context, cfg *rest.Config) (requestCounts, error) {
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return requestCounts{}, err
	}
	raw, err := c.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return requestCounts{}, err
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(string(raw)))
	if err != nil {
		return requestCounts{}, err
	}
	out := requestCounts{byVerbResource: map[string]float64{}}
	fam := families["apiserver_request_total"]
	if fam == nil {
		return out, fmt.Errorf("the API server exports no apiserver_request_total")
	}
	for _, m := range fam.GetMetric() {
		l := labels(m)
		key := l["verb"] + " " + l["resource"]
		if l["subresource"] != "" {
			key += "/" + l["subresource"]
		}
		out.byVerbResource[key] += m.GetCounter().GetValue()
		if l["code"] == "409" {
			out.conflicts += m.GetCounter().GetValue()
		}
	}
	return out, nil
}

func labels(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

func (after requestCounts) minus(before requestCounts) requestCounts {
	d := requestCounts{byVerbResource: map[string]float64{}, conflicts: after.conflicts - before.conflicts}
	for k, v := range after.byVerbResource {
		if n := v - before.byVerbResource[k]; n > 0 {
			d.byVerbResource[k] = n
		}
	}
	return d
}

var writeVerbs = map[string]bool{"POST": true, "PUT": true, "PATCH": true, "DELETE": true, "APPLY": true, "CREATE": true, "UPDATE": true}

func (r requestCounts) writes() float64 {
	var n float64
	for k, v := range r.byVerbResource {
		if writeVerbs[strings.ToUpper(strings.Fields(k)[0])] {
			n += v
		}
	}
	return n
}

func (r requestCounts) total() float64 {
	var n float64
	for _, v := range r.byVerbResource {
		n += v
	}
	return n
}

// top lists the largest entries, for "what dominates".
func (r requestCounts) top(n int) []string {
	keys := make([]string, 0, len(r.byVerbResource))
	for k := range r.byVerbResource {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return r.byVerbResource[keys[i]] > r.byVerbResource[keys[j]] })
	if len(keys) > n {
		keys = keys[:n]
	}
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = fmt.Sprintf("%s=%.0f", k, r.byVerbResource[k])
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
			out[labels(m)["controller"]] += m.GetCounter().GetValue()
		}
	}
	return out, nil
}
