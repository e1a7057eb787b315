package clustertopology

import (
	"context"
	"fmt"
	"strconv"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"capstan.dev/capstan/internal/contract"
	"capstan.dev/capstan/internal/kit"
	"capstan.dev/capstan/internal/patch"
)

// applyRequest is one object the topology wants.
type applyRequest struct {
	// want is the desired object, typed or unstructured; its name and
	// namespace say which object it is.
	want client.Object
	// current is the object as the cache has it; nil when it does not
	// exist (yet).
	current client.Object
}

// applied is the outcome of one apply.
type applied struct {
	obj     *unstructured.Unstructured
	written bool
}

// toApplyBody turns a desired object into what a server-side apply sends:
// its JSON form with apiVersion and kind, without status and without the
// metadata the server keeps.
func toApplyBody(obj client.Object, gvk schema.GroupVersionKind) (*unstructured.Unstructured, error) {
	m, err := patch.ToMap(obj)
	if err != nil {
		return nil, err
	}
	delete(m, "status")
	if md, ok := m["metadata"].(map[string]any); ok {
		for _, k := range []string{"creationTimestamp", "resourceVersion", "uid", "generation", "managedFields", "selfLink", "deletionTimestamp", "deletionGracePeriodSeconds"} {
			delete(md, k)
		}
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(gvk)
	return u, nil
}

// apply server-side applies req.want as the topology's field manager, with
// force (the fields it sends are the topology's: a user's edit of one is
// set back; fields it does not send stay with whoever owns them), unless the
// cached copy shows the apply would change nothing.
func (r *Reconciler) apply(ctx context.Context, req applyRequest) (applied, error) {
	gvk, err := apiutil.GVKForObject(req.want, r.Client.Scheme())
	if err != nil {
		return applied{}, err
	}
	body, err := toApplyBody(req.want, gvk)
	if err != nil {
		return applied{}, err
	}
	if req.current != nil && req.current.GetUID() != "" {
		current, err := patch.ToMap(req.current)
		if err != nil {
			return applied{}, err
		}
		wantMap, err := patch.ToMap(body.Object)
		if err != nil {
			return applied{}, err
		}
		if change, _ := needsApply(current, wantMap, contract.FieldsAppliedBy(req.current, FieldManager)); !change {
			return applied{obj: &unstructured.Unstructured{Object: current}}, nil
		}
	}
	log := ctrl.LoggerFrom(ctx)
	if err := r.Client.Patch(ctx, body, client.Apply, client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
		return applied{}, fmt.Errorf("applying %s %s: %w", gvk.Kind, body.GetName(), err)
	}
	log.V(1).Info("applied topology object", "kind", gvk.Kind, "name", body.GetName(), "created", req.current == nil)
	return applied{obj: body, written: true}, nil
}

// waitForWrites waits until the cache shows the objects the reconcile wrote,
// so that the next reconcile does not compute from a copy older than its
// own writes (and, say, rotate a template a second time).
func (r *Reconciler) waitForWrites(ctx context.Context, objs []*unstructured.Unstructured) error {
	if len(objs) == 0 {
		return nil
	}
	return kit.WaitForCache(ctx, r.Client, caughtUp, objs...)
}

// caughtUp accepts a cached copy at least as new as the written one.
func caughtUp(want, got client.Object, err error) bool {
	if err != nil {
		return false
	}
	w, err1 := strconv.ParseUint(want.GetResourceVersion(), 10, 64)
	g, err2 := strconv.ParseUint(got.GetResourceVersion(), 10, 64)
	if err1 != nil || err2 != nil {
		return want.GetResourceVersion() == got.GetResourceVersion()
	}
	return g >= w
}
