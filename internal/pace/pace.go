package pace

import (
	"reflect"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// DefaultStatusInterval is how long a controller holds back a status change
// that no other controller acts on, after its last status write to the same
// object: within it, every further change joins one write.
const DefaultStatusInterval = time.Second

// StaleRetry is the safety-net requeue for a reconcile that read a copy
// older than its controller's own last write; the watch event of that
// write normally wakes the object first.
const StaleRetry = 2 * time.Second

// Pacer is one controller's memory of its own writes, object by object. It
// lets a Helper save two kinds of write: a write computed from a cached copy
// that predates the controller's own last write (the cache has not caught
// up; the watch event of that write is on its way and the next reconcile
// sees it), and a status change that only reports (a count, a message, a
// summary condition) arriving less than an interval after the last status
// write, which waits and goes out with whatever else changes meanwhile.
// A Pacer is safe for concurrent reconciles.
type Pacer struct {
	interval time.Duration
	now      func() time.Time
	// firstAtOnce: an object's first reporting-only change is not held.
	firstAtOnce bool

	mu        sync.Mutex
	writes    map[types.UID]lastWrite
	lastSweep time.Time
}

type lastWrite struct {
	// to is the resourceVersion the last Patch produced; passed are those it
	// moved the object past (the one it was computed from and, when it wrote
	// both the main object and the status, the one in between), for an API
	// server whose resourceVersions do not compare.
	to     string
	passed []string
	// statusAt is when the status was last written, or when a first status
	// change was held back; at is when the controller last wrote.
	statusAt, at time.Time
}

// NewPacer returns a Pacer that spaces reporting-only status writes to an
// object at least interval apart.
func NewPacer(interval time.Duration, opts ...PacerOption) *Pacer {
	p := &Pacer{interval: interval, now: time.Now, writes: map[types.UID]lastWrite{}}
	for _, o := range opts {
		o(p)
	}
	return p
}

// PacerOption changes how a Pacer paces.
type PacerOption func(*Pacer)

// FirstAtOnce lets an object's first reporting-only status change out at
// once, for objects whose first report others copy (a KubeadmConfig's
// conditions show on its Machine): holding it back would only make the
// copy late, and written twice.
func FirstAtOnce() PacerOption {
	return func(p *Pacer) { p.firstAtOnce = true }
}

// Gate picks, from a status (as JSON-decoded by the Helper), the part that
// other controllers act on. A status change that leaves the gate's pick
// unchanged only reports, and may be paced; any other goes out at once.
type Gate func(status map[string]any) any

// Fields gates on the named top-level status fields and on whether the
// named conditions are True (not on False against Unknown or absent, nor on
// reason or message): controllers act on a condition turning True or
// ceasing to be, and nothing else is worth an immediate write.
func Fields(fields []string, conditionTypes ...string) Gate {
	return func(status map[string]any) any {
		pick := map[string]any{}
		for _, f := range fields {
			pick[f] = status[f]
		}
		pick["conditions"] = conditionStatuses(status, func(t string) bool {
			for _, want := range conditionTypes {
				if t == want {
					return true
				}
			}
			return false
		})
		return pick
	}
}

// AllButTexts gates on every field except the observedGeneration and the
// phase, and on whether each condition is True: a condition turning True or
// ceasing to be, or any other field changing, goes out at once. The phase
// is left out because it is derived from fields that gate (a phase change
// never comes alone), and a new object's first phase then does not force
// its first write out before the object has anything to report.
func AllButTexts(status map[string]any) any {
	pick := map[string]any{}
	for k, v := range status {
		if k != "conditions" && k != "observedGeneration" && k != "phase" {
			pick[k] = v
		}
	}
	pick["conditions"] = conditionStatuses(status, func(string) bool { return true })
	return pick
}

func conditionStatuses(status map[string]any, include func(string) bool) map[string]any {
	out := map[string]any{}
	list, _ := status["conditions"].([]any)
	for _, c := range list {
		m, ok := c.(map[string]any)
		if !ok {
			continue
		}
		t, _ := m["type"].(string)
		if include(t) {
			out[t] = m["status"] == "True"
		}
	}
	return out
}

// Behind tells whether obj, as just read from the cache, predates this
// controller's own last write to it. A reconcile should then act on nothing
// (what it would decide from the old copy, it has already done) and wait
// for the watch event of its write, which is on its way; p may be nil.
func (p *Pacer) Behind(obj client.Object) bool {
	return p != nil && p.Stale(obj.GetUID(), obj.GetResourceVersion())
}

// Wrote records a write the controller made to obj without a Helper (a
// condition it applies to another controller's object), obj carrying the
// resourceVersion the write produced: Behind then tells a copy older than
// it, from which the controller would write the same again.
func (p *Pacer) Wrote(obj client.Object) {
	if obj.GetResourceVersion() != "" {
		p.Record(obj.GetUID(), nil, obj.GetResourceVersion(), false)
	}
}

// Stale tells whether a copy of object uid read at resourceVersion rv
// predates this controller's last write to it.
func (p *Pacer) Stale(uid types.UID, rv string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	w, ok := p.writes[uid]
	if !ok {
		return false
	}
	// Since Kubernetes 1.35 resourceVersions of one resource are comparable
	// integers: anything older than our own write is stale, whoever wrote
	// the versions in between.
	if cmp, err := resourceversion.CompareResourceVersion(rv, w.to); err == nil {
		return cmp < 0
	}
	for _, old := range w.passed {
		if old == rv {
			return true
		}
	}
	return false
}

// HoldFor tells how long a reporting-only status change of uid must wait;
// zero means it may go out now. Unless FirstAtOnce, an object whose status
// the Pacer has no memory of writing (new, or written before the manager
// started) counts as written just now: a new object's first reconciles come
// in a burst, as its creator, its references and its providers react to it
// within a second, and its first status would otherwise be rewritten
// moments later.
func (p *Pacer) HoldFor(uid types.UID) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	w := p.writes[uid]
	if w.statusAt.IsZero() {
		if p.firstAtOnce {
			return 0
		}
		w.statusAt = p.now()
		p.writes[uid] = w
		return p.interval
	}
	if wait := p.interval - p.now().Sub(w.statusAt); wait > 0 {
		return wait
	}
	return 0
}

// Record notes that a write of uid moved it past the resourceVersions
// passed.
func (p *Pacer) Record(uid types.UID, passed []string, to string, status bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	w := p.writes[uid]
	w.passed, w.to, w.at = passed, to, now
	if status {
		w.statusAt = now
	}
	p.writes[uid] = w
	if now.Sub(p.lastSweep) > time.Minute {
		p.lastSweep = now
		for id, old := range p.writes {
			if now.Sub(old.at) > time.Minute && now.Sub(old.statusAt) > time.Minute && id != uid {
				delete(p.writes, id)
			}
		}
	}
}

// Changed tells whether gate's pick differs between two statuses.
func Changed(gate Gate, before, after any) bool {
	b, _ := before.(map[string]any)
	a, _ := after.(map[string]any)
	return !reflect.DeepEqual(prune(gate(b)), prune(gate(a)))
}

// prune drops zero values (false, 0, "", empty lists and maps, nil) from
// maps, so that a field appearing with its zero value is no change: an
// initialization that turns from absent to all false gates nothing.
func prune(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			if e = prune(e); e != nil {
				out[k] = e
			}
		}
		if len(out) == 0 {
			return nil
		}
		return out
	case []any:
		if len(x) == 0 {
			return nil
		}
		return x
	case bool:
		if !x {
			return nil
		}
	case string:
		if x == "" {
			return nil
		}
	case float64:
		if x == 0 {
			return nil
		}
	}
	return v
}
