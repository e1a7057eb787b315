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

// peakRSSMiB is this process's peak resident memory (VmHWM).
func peakRSSMiB() float64 { return processPeakRSSMiB(os.Getpid()) }

// processPeakRSSMiB is process pid's peak resident memory (VmHWM), 0 if
// it cannot be read.
func processPeakRSSMiB(pid int) float64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
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

// clockTicksPerSecond is the unit of /proc/PID/stat's CPU times on Linux
// (USER_HZ), 100 on every architecture Go supports there.
const clockTicksPerSecond = 100

// processCPUSeconds is the CPU time process pid used so far, user and
// system, 0 if it cannot be read.
func processCPUSeconds(pid int) float64 {
	if pid == 0 {
		return 0
	}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name, field 2, is in parentheses and may hold spaces:
	// the fields after its closing one are fixed.
	rest := string(raw)
	if i := strings.LastIndexByte(rest, ')'); i >= 0 {
		rest = rest[i+1:]
	}
	f := strings.Fields(rest)
	// utime and stime are fields 14 and 15 of the line, 12 and 13 after
	// the name.
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / clockTicksPerSecond
}
