package inmemory

import (
	"math/rand/v2"
	"time"

	inmemoryv1 "capstan.dev/capstan/api/infrastructure/inmemory/v1beta2"
)

// Default simulated start-up delays (DESIGN §6).
const (
	DefaultMachineDelay   = 10 * time.Second
	DefaultNodeDelay      = 2 * time.Second
	DefaultAPIServerDelay = 2 * time.Second
	DefaultEtcdDelay      = 2 * time.Second
	DefaultJitterPercent  = 20
)

// Delays are the simulated start-up delays of a machine's stages. A nil
// field means "not set here": the next level (machine, cluster, provider
// options, built-in default) decides.
type Delays struct {
	Machine, Node, APIServer, Etcd *time.Duration
	JitterPercent                  *int32
}

// NoDelays makes every stage instant, for throughput runs.
func NoDelays() *Delays {
	zero := time.Duration(0)
	var none int32
	return &Delays{Machine: &zero, Node: &zero, APIServer: &zero, Etcd: &zero, JitterPercent: &none}
}

func fromAPI(d *inmemoryv1.SimulatedDelays) Delays {
	if d == nil {
		return Delays{}
	}
	dur := func(v interface{ Get() time.Duration }) *time.Duration { x := v.Get(); return &x }
	var out Delays
	if d.Machine != nil {
		out.Machine = dur(durationOf{d.Machine.Duration})
	}
	if d.Node != nil {
		out.Node = dur(durationOf{d.Node.Duration})
	}
	if d.APIServer != nil {
		out.APIServer = dur(durationOf{d.APIServer.Duration})
	}
	if d.Etcd != nil {
		out.Etcd = dur(durationOf{d.Etcd.Duration})
	}
	out.JitterPercent = d.JitterPercent
	return out
}

type durationOf struct{ d time.Duration }

func (d durationOf) Get() time.Duration { return d.d }

// resolvedDelays are a machine's delays with every level applied.
type resolvedDelays struct {
	machine, nodeD, apiServerD, etcdD time.Duration
	jitter                            int32
}

// resolve takes each field from the first level that sets it.
func resolve(levels ...Delays) resolvedDelays {
	r := resolvedDelays{machine: DefaultMachineDelay, nodeD: DefaultNodeDelay, apiServerD: DefaultAPIServerDelay, etcdD: DefaultEtcdDelay, jitter: DefaultJitterPercent}
	pick := func(dst *time.Duration, get func(Delays) *time.Duration) {
		for _, l := range levels {
			if v := get(l); v != nil {
				*dst = *v
				return
			}
		}
	}
	pick(&r.machine, func(d Delays) *time.Duration { return d.Machine })
	pick(&r.nodeD, func(d Delays) *time.Duration { return d.Node })
	pick(&r.apiServerD, func(d Delays) *time.Duration { return d.APIServer })
	pick(&r.etcdD, func(d Delays) *time.Duration { return d.Etcd })
	for _, l := range levels {
		if l.JitterPercent != nil {
			r.jitter = *l.JitterPercent
			break
		}
	}
	return r
}

// jittered varies d uniformly by up to the jitter share either way.
func (r resolvedDelays) jittered(d time.Duration) time.Duration {
	if d <= 0 || r.jitter <= 0 {
		return max(d, 0)
	}
	span := float64(d) * float64(r.jitter) / 100
	return time.Duration(float64(d) + (rand.Float64()*2-1)*span)
}

func (r resolvedDelays) machineDelay() time.Duration { return r.jittered(r.machine) }
func (r resolvedDelays) node() time.Duration         { return r.jittered(r.nodeD) }
func (r resolvedDelays) apiServer() time.Duration    { return r.jittered(r.apiServerD) }
func (r resolvedDelays) etcd() time.Duration         { return r.jittered(r.etcdD) }
