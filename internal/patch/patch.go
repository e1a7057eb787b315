// Package patch writes what a reconcile changed on an object, and nothing
// else: one JSON merge patch for metadata and spec when they changed, one
// for the status subresource when it changed, no request at all when
// nothing did. Merge patches carry only the fields that differ, so two
// controllers that own different fields of an object never conflict; the
// patch is made conditional on the object's resourceVersion only when it
// changes lists that others edit too (finalizers, owner references, status
// conditions), where a blind write could drop someone else's entry.
package patch

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"capstan.dev/capstan/internal/pace"
)

// Helper remembers an object as it was read, to patch what changes later.
type Helper struct {
	client client.Client
	before map[string]any

	// With an owned part, status goes out by server-side apply under
	// fieldManager, carrying only what ownedStatus keeps of it.
	fieldManager string
	ownedStatus  func(status map[string]any) map[string]any

	// soleWriter: no other controller writes the object's status.
	soleWriter bool

	// With a pacer, stale copies write nothing and reporting-only status
	// changes wait; deferred is how long, after the last Patch.
	pacer    *pace.Pacer
	gate     pace.Gate
	readRV   string
	deferred time.Duration
}

// Option changes how a Helper writes.
type Option func(*Helper)

// Pace makes the Helper consult p: it writes nothing from a copy older than
// the controller's own last write, and holds back a status change that
// leaves gate's pick unchanged until p's interval has passed since the last
// status write. Deferred tells the reconcile when to come back.
func Pace(p *pace.Pacer, gate pace.Gate) Option {
	return func(h *Helper) {
		h.pacer = p
		h.gate = gate
	}
}

// OwnedConditions makes status writes server-side applies, as fieldManager,
// of the whole status but only the listed condition types. Use it for
// objects whose conditions several controllers write (a Machine's UpToDate
// is its MachineSet's, HealthCheckSucceeded its health check's): each
// controller then owns its own entries, and no write can conflict with or
// drop another's.
func OwnedConditions(fieldManager string, types ...string) Option {
	owned := map[string]bool{}
	for _, t := range types {
		owned[t] = true
	}
	return OwnedStatus(fieldManager, func(status map[string]any) map[string]any {
		KeepConditions(status, func(t string) bool { return owned[t] })
		return status
	})
}

// OwnedStatus makes status writes server-side applies, as fieldManager, of
// what own keeps of the status (own gets a copy it may change). Use it when
// the status is shared out by field as well as by condition (a topology
// Cluster's upgrade plans and TopologyReconciled are the topology
// controller's, the rest the Cluster controller's): each writer applies its
// part, so neither conflicts with the other nor sets back what the other
// wrote since it read.
func OwnedStatus(fieldManager string, own func(status map[string]any) map[string]any) Option {
	return func(h *Helper) {
		h.fieldManager = fieldManager
		h.ownedStatus = own
	}
}

// KeepConditions drops from status's conditions list the entries whose type
// keep refuses.
func KeepConditions(status map[string]any, keep func(conditionType string) bool) {
	list, _ := status["conditions"].([]any)
	kept := []any{}
	for _, c := range list {
		if m, ok := c.(map[string]any); ok && keep(fmt.Sprint(m["type"])) {
			kept = append(kept, c)
		}
	}
	status["conditions"] = kept
}

// SoleStatusWriter declares that the calling controller is the only writer
// of the object's status (a KubeadmControlPlane's, a MachineDeployment's):
// its conditions list then goes out without a resourceVersion lock, since
// there is no one else's entry to drop. A write from a copy a moment stale
// lands instead of failing with 409 Conflict and being retried; the next
// reconcile, from the fresher copy, writes what changed since.
func SoleStatusWriter() Option {
	return func(h *Helper) { h.soleWriter = true }
}

// NewHelper snapshots obj; call it right after reading obj.
func NewHelper(obj client.Object, c client.Client, opts ...Option) (*Helper, error) {
	before, err := ToMap(obj)
	if err != nil {
		return nil, err
	}
	h := &Helper{client: c, before: before, readRV: obj.GetResourceVersion()}
	for _, o := range opts {
		o(h)
	}
	return h, nil
}

// Patch writes obj's changes since the snapshot. On success the snapshot
// moves to obj, so a second call writes only what changed in between.
func (h *Helper) Patch(ctx context.Context, obj client.Object) error {
	after, err := ToMap(obj)
	if err != nil {
		return err
	}
	beforeMain, beforeStatus := split(h.before)
	afterMain, afterStatus := split(after)
	mainChanged := !reflect.DeepEqual(beforeMain, afterMain)
	statusChanged := !reflect.DeepEqual(beforeStatus, afterStatus)
	h.deferred = 0
	if h.pacer != nil && (mainChanged || statusChanged) && h.pacer.Stale(obj.GetUID(), h.readRV) {
		h.deferred = pace.StaleRetry
		return nil
	}
	if h.pacer != nil && statusChanged && !pace.Changed(h.gate, beforeStatus, afterStatus) {
		if wait := h.pacer.HoldFor(obj.GetUID()); wait > 0 {
			h.deferred = wait
			statusChanged = false
			// The held-back change is still to write next time.
			after["status"] = beforeStatus
		}
	}
	passed := []string{obj.GetResourceVersion()}

	if mainChanged {
		body, err := mergePatch(beforeMain, afterMain)
		if err != nil {
			return err
		}
		if needsLock(beforeMain, afterMain) {
			body, err = withResourceVersion(body, obj.GetResourceVersion())
			if err != nil {
				return err
			}
		}
		target := obj.DeepCopyObject().(client.Object)
		if err := h.client.Patch(ctx, target, client.RawPatch(types.MergePatchType, body)); err != nil {
			return fmt.Errorf("patching %s: %w", obj.GetName(), err)
		}
		obj.SetResourceVersion(target.GetResourceVersion())
		if statusChanged {
			passed = append(passed, obj.GetResourceVersion())
		}
		if gen := target.GetGeneration(); gen != obj.GetGeneration() {
			// The controller changed the spec it is reporting on: what it
			// observed is the spec it just wrote.
			if bumpObservedGeneration(afterStatus, obj.GetGeneration(), gen) {
				raw, err := json.Marshal(map[string]any{"status": afterStatus})
				if err != nil {
					return err
				}
				if err := json.Unmarshal(raw, obj); err != nil {
					return err
				}
			}
			obj.SetGeneration(gen)
		}
	}
	if statusChanged && h.ownedStatus != nil {
		if err := h.applyStatus(ctx, obj, afterStatus); err != nil {
			return err
		}
	} else if statusChanged {
		body, err := mergePatch(map[string]any{"status": beforeStatus}, map[string]any{"status": afterStatus})
		if err != nil {
			return err
		}
		if conditionsChanged(beforeStatus, afterStatus) && !h.soleWriter {
			// A merge patch replaces the whole conditions list; other
			// controllers own some of its entries (UpToDate on a Machine is
			// its MachineSet's), so the list is only written over the
			// version it was read from.
			if body, err = withResourceVersion(body, obj.GetResourceVersion()); err != nil {
				return err
			}
		}
		target := obj.DeepCopyObject().(client.Object)
		if err := h.client.Status().Patch(ctx, target, client.RawPatch(types.MergePatchType, body)); err != nil {
			return fmt.Errorf("patching status of %s: %w", obj.GetName(), err)
		}
		obj.SetResourceVersion(target.GetResourceVersion())
	}
	if h.pacer != nil && (mainChanged || statusChanged) {
		h.pacer.Record(obj.GetUID(), passed, obj.GetResourceVersion(), statusChanged)
	}
	h.before = after
	h.readRV = obj.GetResourceVersion()
	return nil
}

// Deferred is how long the reconcile should wait before coming back because
// the last Patch held a change back (a reporting-only status change inside
// the pacing interval, or any change computed from a stale copy); zero when
// it held nothing back.
func (h *Helper) Deferred() time.Duration { return h.deferred }

// applyStatus server-side applies the part of the status the controller
// owns.
func (h *Helper) applyStatus(ctx context.Context, obj client.Object, status any) error {
	st, _ := runtime.DeepCopyJSONValue(status).(map[string]any)
	if st == nil {
		st = map[string]any{}
	}
	gvk, err := apiutil.GVKForObject(obj, h.client.Scheme())
	if err != nil {
		return err
	}
	apply := &unstructured.Unstructured{Object: map[string]any{"status": h.ownedStatus(st)}}
	apply.SetGroupVersionKind(gvk)
	apply.SetNamespace(obj.GetNamespace())
	apply.SetName(obj.GetName())
	if err := h.client.Status().Patch(ctx, apply, client.Apply, client.FieldOwner(h.fieldManager), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying status of %s: %w", obj.GetName(), err)
	}
	obj.SetResourceVersion(apply.GetResourceVersion())
	return nil
}

// ToMap is obj's JSON form as a map (numbers as float64): the form in which
// the helper, and anything that compares objects as the server sees them,
// tells what changed.
func ToMap(obj any) (map[string]any, error) {
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	m := map[string]any{}
	return m, json.Unmarshal(raw, &m)
}

// split separates the status from the rest, dropping fields the server owns
// so that they never make a difference.
func split(obj map[string]any) (main map[string]any, status any) {
	main = make(map[string]any, len(obj))
	for k, v := range obj {
		if k != "status" {
			main[k] = v
		}
	}
	if md, ok := main["metadata"].(map[string]any); ok {
		clean := make(map[string]any, len(md))
		for k, v := range md {
			switch k {
			case "resourceVersion", "managedFields", "generation", "creationTimestamp", "uid", "selfLink":
			default:
				clean[k] = v
			}
		}
		main["metadata"] = clean
	}
	return main, obj["status"]
}

func mergePatch(before, after any) ([]byte, error) {
	b, err := json.Marshal(before)
	if err != nil {
		return nil, err
	}
	a, err := json.Marshal(after)
	if err != nil {
		return nil, err
	}
	return jsonpatch.CreateMergePatch(b, a)
}

func needsLock(before, after map[string]any) bool {
	bm, _ := before["metadata"].(map[string]any)
	am, _ := after["metadata"].(map[string]any)
	for _, list := range []string{"finalizers", "ownerReferences"} {
		if !reflect.DeepEqual(bm[list], am[list]) {
			return true
		}
	}
	return false
}

func conditionsChanged(before, after any) bool {
	b, _ := before.(map[string]any)
	a, _ := after.(map[string]any)
	return !reflect.DeepEqual(b["conditions"], a["conditions"])
}

func withResourceVersion(body []byte, rv string) ([]byte, error) {
	p := map[string]any{}
	if err := json.Unmarshal(body, &p); err != nil {
		return nil, err
	}
	md, _ := p["metadata"].(map[string]any)
	if md == nil {
		md = map[string]any{}
		p["metadata"] = md
	}
	md["resourceVersion"] = rv
	return json.Marshal(p)
}

// bumpObservedGeneration moves the status's observedGeneration, and its
// conditions', from old to gen, and tells whether it moved any.
func bumpObservedGeneration(status any, old, gen int64) bool {
	st, ok := status.(map[string]any)
	if !ok {
		return false
	}
	moved := false
	bump := func(m map[string]any) {
		if v, ok := m["observedGeneration"]; ok && toInt64(v) == old {
			m["observedGeneration"] = float64(gen)
			moved = true
		}
	}
	bump(st)
	conds, _ := st["conditions"].([]any)
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok {
			bump(m)
		}
	}
	return moved
}

func toInt64(v any) int64 {
	switch n := v.(type) {
	case int64:
		return n
	case float64:
		return int64(n)
	case int:
		return int64(n)
	}
	return -1
}
