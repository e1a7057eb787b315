package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// counts are apiserver_request_total summed by "VERB resource[/sub]", with
// 409 responses counted apart.
type counts struct {
	byVerbResource map[string]float64
	conflicts      float64
	conflictsByKey map[string]float64
}

// scrape reads apiserver_request_total from the API server's /metrics.
func scrape(ctx context.Context, cfg *rest.Config) (counts, error) {
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return counts{}, err
	}
	raw, err := c.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return counts{}, fmt.Errorf("reading the API server's /metrics: %w", err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(string(raw)))
	if err != nil {
		return counts{}, fmt.Errorf("parsing the API server's /metrics: %w", err)
	}
	out := counts{byVerbResource: map[string]float64{}, conflictsByKey: map[string]float64{}}
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
		out.byVerbResource[key] += v
		if l["code"] == "409" {
			out.conflicts += v
			out.conflictsByKey[key] += v
		}
	}
	return out, nil
}

func value(m *dto.Metric) float64 { return m.GetCounter().GetValue() }

func (after counts) minus(before counts) counts {
	d := counts{byVerbResource: map[string]float64{}, conflicts: after.conflicts - before.conflicts, conflictsByKey: map[string]float64{}}
	for k, v := range after.byVerbResource {
		if n := v - before.byVerbResource[k]; n > 0 {
			d.byVerbResource[k] = n
		}
	}
	for k, v := range after.conflictsByKey {
		if n := v - before.conflictsByKey[k]; n > 0 {
			d.conflictsByKey[k] = n
		}
	}
	return d
}

// writeVerbs are the verbs that change state, as apiserver_request_total
// names them.
var writeVerbs = map[string]bool{"POST": true, "PUT": true, "PATCH": true, "DELETE": true, "DELETECOLLECTION": true, "APPLY": true, "CREATE": true, "UPDATE": true}

func isWrite(key string) bool { return writeVerbs[strings.SplitN(key, " ", 2)[0]] }

func (c counts) writes() float64 {
	var n float64
	for k, v := range c.byVerbResource {
		if isWrite(k) {
			n += v
		}
	}
	return n
}

func (c counts) total() float64 {
	var n float64
	for _, v := range c.byVerbResource {
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

// peakRSSMiB is this process's peak resident memory (VmHWM).
func peakRSSMiB() float64 {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			f := strings.Fields(line)
			if len(f) >= 2 {
				kb, _ := strconv.ParseFloat(f[1], 64)
				return kb / 1024
			}
		}
	}
	return 0
}
