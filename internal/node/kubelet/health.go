package kubelet

import (
	"context"
	"sync"
	"time"

	"github.com/go-logr/logr"
)

// healthBook holds the last health verdict of each static pod.
type healthBook struct {
	mu      sync.Mutex
	healthy map[string]bool
}

func newHealthBook() *healthBook { return &healthBook{healthy: map[string]bool{}} }

// check runs every static pod's Healthy concurrently, each bounded by the
// heartbeat interval (at least a second, at most ten) so one hung component
// cannot stall the heartbeat, and logs each change of verdict.
func (h *healthBook) check(ctx context.Context, log logr.Logger, pods []StaticPod, interval time.Duration) {
	timeout := min(max(interval, time.Second), 10*time.Second)
	results := make([]error, len(pods))
	var wg sync.WaitGroup
	for i, sp := range pods {
		if sp.Healthy == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			results[i] = sp.Healthy(cctx)
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		return // a cancelled check says nothing about the component
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, sp := range pods {
		healthy := results[i] == nil
		if old, known := h.healthy[sp.Component]; !known || old != healthy {
			if healthy {
				log.Info("Static pod healthy", "component", sp.Component)
			} else {
				log.Info("Static pod unhealthy", "component", sp.Component, "reason", results[i].Error())
			}
		}
		h.healthy[sp.Component] = healthy
	}
}

// ready is the last verdict; a component never checked counts as not ready
// unless it has no check at all.
func (h *healthBook) ready(sp StaticPod) bool {
	if sp.Healthy == nil {
		return true
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.healthy[sp.Component]
}
