package bench

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"capstan.dev/capstan/internal/procstat"
)

// RequestCounts are apiserver_request_total summed by "VERB
// resource[/sub]", with 409 responses counted apart.
type RequestCounts struct {
	ByVerbResource map[string]float64
	Conflicts      float64
	ConflictsByKey map[string]float64
}

// ScrapeRequests reads apiserver_request_total from the API server's
// /metrics.
func ScrapeRequests(ctx context.Context, cfg *rest.Config) (RequestCounts, error) {
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return RequestCounts{}, err
	}
	raw, err := c.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return RequestCounts{}, fmt.Errorf("reading the API server's /metrics: %w", err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(string(raw)))
	if err != nil {
		return RequestCounts{}, fmt.Errorf("parsing the API server's /metrics: %w", err)
	}
	out := RequestCounts{ByVerbResource: map[string]float64{}, ConflictsByKey: map[string]float64{}}
	fam := families["apiserver_request_total"]
	if fam == nil {
		return out, fmt.Errorf("the API server exports no apiserver_request_total")
	}
	for _, m := range fam.GetMetric() {
		l := map[string]string{}
		for _, p := range m.GetLabel() {
			l[p.GetName()] = p.GetValue()
		}
		key := l["verb"] + " " + l["resource"]
		if l["subresource"] != "" {
			key += "/" + l["subresource"]
		}
		v := value(m)
		out.ByVerbResource[key] += v
		if l["code"] == "409" {
			out.Conflicts += v
			out.ConflictsByKey[key] += v
		}
	}
	return out, nil
}

func value(m *dto.Metric) float64 { return m.GetCounter().GetValue() }

// Minus is what happened between before and after.
func (after RequestCounts) Minus(before RequestCounts) RequestCounts {
	d := RequestCounts{ByVerbResource: map[string]float64{}, Conflicts: after.Conflicts - before.Conflicts, ConflictsByKey: map[string]float64{}}
	for k, v := range after.ByVerbResource {
		if n := v - before.ByVerbResource[k]; n > 0 {
			d.ByVerbResource[k] = n
		}
	}
	for k, v := range after.ConflictsByKey {
		if n := v - before.ConflictsByKey[k]; n > 0 {
			d.ConflictsByKey[k] = n
		}
	}
	return d
}

// writeVerbs are the verbs that change state, as apiserver_request_total
// names them.
var writeVerbs = map[string]bool{"POST": true, "PUT": true, "PATCH": true, "DELETE": true, "DELETECOLLECTION": true, "APPLY": true, "CREATE": true, "UPDATE": true}

func isWrite(key string) bool { return writeVerbs[strings.SplitN(key, " ", 2)[0]] }

// Writes counts the requests that change state.
func (c RequestCounts) Writes() float64 {
	var n float64
	for k, v := range c.ByVerbResource {
		if isWrite(k) {
			n += v
		}
	}
	return n
}

// Total counts every request.
func (c RequestCounts) Total() float64 {
	var n float64
	for _, v := range c.ByVerbResource {
		n += v
	}
	return n
}

// cpuSeconds is the CPU time this process used so far, user and system.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Sec+ru.Stime.Sec) + float64(ru.Utime.Usec+ru.Stime.Usec)/1e6
}

// peakRSSMiB is this process's peak resident memory (VmHWM), 0 if it
// cannot be read.
func peakRSSMiB() float64 {
	u, _ := procstat.Read(os.Getpid())
	return u.PeakRSSMiB
}
