package move

import (
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"capstan.dev/capstan/internal/patch"
	"capstan.dev/capstan/internal/progress"
)

var clusterGVK = schema.GroupVersionKind{Group: coreGroup, Version: "v1beta2", Kind: clusterKind}

// ToCluster moves the clusters of source to target, two management
// clusters with the same CRDs installed.
func ToCluster(ctx context.Context, source, target client.Client, o Options) error {
	same, err := sameCluster(ctx, source, target)
	if err != nil {
		return &Error{Step: "connecting", Err: err}
	}
	if same {
		// Every object would look like its own copy, and be deleted.
		return &Error{Step: "connecting", Err: errors.New("the source and the target are the same cluster (their kube-system namespaces have the same UID): give --to-kubeconfig another management cluster")}
	}
	return run(ctx, newClusterSource(source, o), newClusterTarget(target, o), o)
}

type clusterSource struct {
	c            client.Client
	namespace    string
	out          io.Writer
	pauseTimeout time.Duration
	hook         *writeHook
	// pausedByMove counts the objects found or made paused by the move.
	pausedByMove int
}

// sameCluster tells whether two clients reach the same cluster, by the UID
// of its kube-system namespace.
func sameCluster(ctx context.Context, a, b client.Client) (bool, error) {
	var uids []types.UID
	for _, c := range []client.Client{a, b} {
		ns := &corev1.Namespace{}
		if err := c.Get(ctx, client.ObjectKey{Name: metav1.NamespaceSystem}, ns); err != nil {
			return false, fmt.Errorf("reading namespace kube-system: %w", err)
		}
		uids = append(uids, ns.UID)
	}
	return uids[0] == uids[1], nil
}

func newClusterSource(c client.Client, o Options) *clusterSource {
	out := o.Out
	if out == nil {
		out = io.Discard
	}
	return &clusterSource{c: c, namespace: o.Namespace, out: out, pauseTimeout: o.PauseTimeout, hook: newWriteHook(o.After)}
}

func newClusterTarget(c client.Client, o Options) *clusterTarget {
	return &clusterTarget{c: c, namespace: o.Namespace, uids: map[Key]types.UID{}, hook: newWriteHook(o.After)}
}

func (s *clusterSource) paused() int { return s.pausedByMove }

func (s *clusterSource) describe() string {
	if s.namespace == "" {
		return "the source (all namespaces)"
	}
	return "the source (namespace " + s.namespace + ")"
}

func (s *clusterSource) objects(ctx context.Context, pause bool) ([]*unstructured.Unstructured, error) {
	if !pause {
		return discover(ctx, s.c, s.namespace)
	}
	// An object being deleted would come back to life as a copy: let the
	// source's controllers finish deleting before anything pauses.
	if err := s.waitDeletions(ctx); err != nil {
		return nil, err
	}
	clusters := &unstructured.UnstructuredList{}
	clusters.SetGroupVersionKind(clusterGVK.GroupVersion().WithKind(clusterKind + "List"))
	var opts []client.ListOption
	if s.namespace != "" {
		opts = append(opts, client.InNamespace(s.namespace))
	}
	if err := s.c.List(ctx, clusters, opts...); err != nil && !meta.IsNoMatchError(err) {
		return nil, fmt.Errorf("listing Clusters: %w", err)
	}
	for i := range clusters.Items {
		cl := &clusters.Items[i]
		k := keyOf(cl)
		paused, _, _ := unstructured.NestedBool(cl.Object, "spec", "paused")
		_, ours := cl.GetAnnotations()[pausedByMoveKey]
		switch {
		case paused && ours:
			s.pausedByMove++
			fmt.Fprintf(s.out, "%s is paused (by an earlier run of this move).\n", k)
		case paused:
			fmt.Fprintf(s.out, "%s was paused before the move; it stays paused in the target.\n", k)
		default:
			pause := patch.Merge(map[string]any{"metadata": map[string]any{"annotations": map[string]any{pausedByMoveKey: "true"}}, "spec": map[string]any{"paused": true}})
			if err := s.c.Patch(ctx, cl, pause); err != nil {
				return nil, fmt.Errorf("pausing %s: %w", k, err)
			}
			s.pausedByMove++
			fmt.Fprintf(s.out, "Paused %s (spec.paused).\n", k)
			if err := s.hook.wrote("pause", k); err != nil {
				return nil, err
			}
		}
	}
	objs, err := discover(ctx, s.c, s.namespace)
	if err != nil {
		return nil, err
	}
	// A controller may not look at its objects again when their Cluster
	// pauses; the paused annotation on the object itself wakes it, and it
	// reports the pause in its Paused condition. Objects without that
	// condition have no controller that pauses.
	annotated := 0
	for _, u := range objs {
		k := keyOf(u)
		// A cluster-scoped object stays in the source, serving whatever
		// else shares it there: it is not paused.
		if (k.Group == coreGroup && k.Kind == clusterKind) || k.Namespace == "" || !hasCondition(u, "Paused") {
			continue
		}
		if _, paused := u.GetAnnotations()[pausedAnnotation]; paused {
			if _, ours := u.GetAnnotations()[pausedByMoveKey]; ours {
				s.pausedByMove++
			}
			continue // paused by a user (stays so) or by an earlier run
		}
		pause := patch.Merge(map[string]any{"metadata": map[string]any{"annotations": map[string]any{pausedAnnotation: "", pausedByMoveKey: "true"}}})
		if err := s.c.Patch(ctx, u, pause); err != nil {
			return nil, fmt.Errorf("pausing %s: %w", k, err)
		}
		s.pausedByMove++
		annotated++
		if err := s.hook.wrote("pause", k); err != nil {
			return nil, err
		}
	}
	if annotated > 0 {
		fmt.Fprintf(s.out, "Paused %d objects with the %s annotation.\n", annotated, pausedAnnotation)
		if objs, err = discover(ctx, s.c, s.namespace); err != nil {
			return nil, err
		}
	}
	if s.pauseTimeout <= 0 || len(objs) == 0 {
		return objs, nil
	}
	// Controllers say they stopped through each object's Paused condition;
	// an object without one has no controller reporting on it.
	fmt.Fprintf(s.out, "Waiting until the source's controllers report %d objects paused.\n", len(objs))
	deadline := time.Now().Add(s.pauseTimeout)
	report := progress.New(s.out)
	defer report.Stop()
	for {
		waiting := notPaused(objs)
		if len(waiting) == 0 {
			report.Status(fmt.Sprintf("%d objects paused", len(objs)))
			break
		}
		report.Status(fmt.Sprintf("%d of %d objects paused", len(objs)-len(waiting), len(objs)), waiting...)
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("after %s these objects still do not report the Paused condition True for their current generation: %s. Is the source's manager running? (--pause-timeout 0 skips this wait when no controller runs)",
				s.pauseTimeout, strings.Join(waiting, ", "))
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
		if objs, err = discover(ctx, s.c, s.namespace); err != nil {
			return nil, err
		}
	}
	// The final list: nothing changes once everything is paused.
	return discover(ctx, s.c, s.namespace)
}

func hasCondition(u *unstructured.Unstructured, t string) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, _ := c.(map[string]any); m["type"] == t {
			return true
		}
	}
	return false
}

// waitDeletions waits until no object of the graph is being deleted.
func (s *clusterSource) waitDeletions(ctx context.Context) error {
	deadline := time.Now().Add(s.pauseTimeout)
	said := false
	for {
		objs, err := discover(ctx, s.c, s.namespace)
		if err != nil {
			return err
		}
		var deleting []string
		for _, u := range objs {
			if u.GetDeletionTimestamp() != nil {
				deleting = append(deleting, keyOf(u).String())
			}
		}
		if len(deleting) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("these objects are being deleted and would come back as copies: %s. Let the source's controllers finish (unpause their Cluster if a move paused it, remove stuck finalizers) and run the move again",
				strings.Join(deleting, ", "))
		}
		if !said {
			fmt.Fprintf(s.out, "Waiting until %d objects being deleted are gone: %s.\n", len(deleting), strings.Join(deleting, ", "))
			said = true
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// notPaused names the objects whose Paused condition is present but not
// True for their current generation.
func notPaused(objs []*unstructured.Unstructured) []string {
	var out []string
	for _, u := range objs {
		if u.GetNamespace() == "" {
			continue // not paused: it stays in the source
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] != "Paused" {
				continue
			}
			gen, _, _ := unstructured.NestedInt64(m, "observedGeneration")
			if m["status"] != "True" || (gen != 0 && gen < u.GetGeneration()) {
				out = append(out, keyOf(u).String())
			}
		}
	}
	return out
}

// remove deletes the object from the source without its finalizers, so no
// controller there acts on the deletion (the machines now belong to the
// target). The UID precondition never deletes a newer object of the name.
func (s *clusterSource) remove(ctx context.Context, obj *unstructured.Unstructured) (bool, error) {
	cur := &unstructured.Unstructured{}
	cur.SetGroupVersionKind(obj.GroupVersionKind())
	if err := s.c.Get(ctx, client.ObjectKeyFromObject(obj), cur); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	if cur.GetUID() != obj.GetUID() {
		return false, nil
	}
	if len(cur.GetFinalizers()) > 0 {
		if err := s.c.Patch(ctx, cur, patch.Merge(map[string]any{"metadata": map[string]any{"finalizers": nil}})); err != nil {
			return false, client.IgnoreNotFound(err)
		}
	}
	uid := obj.GetUID()
	err := s.c.Delete(ctx, cur, client.Preconditions{UID: &uid})
	if apierrors.IsConflict(err) {
		return true, nil // a newer object of the name
	}
	return true, client.IgnoreNotFound(err)
}

// commit marks the roots of the move's graph in the source (its
// namespaced objects that no object of the graph owns: the Clusters, and
// the templates and classes found only through a reference in a spec)
// before the first deletion. An undo then refuses, since the source can
// no longer be put back as it was; and a resumed move finds a marked root
// and all it owns even when what referenced it is gone already. Roots are
// deleted last, so the mark lasts while anything of theirs is left.
func (s *clusterSource) commit(ctx context.Context, objs []*unstructured.Unstructured) (bool, error) {
	uids := map[types.UID]bool{}
	for _, u := range objs {
		uids[u.GetUID()] = true
	}
	marked := false
	for _, u := range objs {
		if u.GetNamespace() == "" || ownedWithin(u, uids) {
			continue
		}
		if _, marked := u.GetAnnotations()[deletingKey]; marked {
			continue
		}
		if err := s.c.Patch(ctx, u, patch.Merge(map[string]any{"metadata": map[string]any{"annotations": map[string]any{deletingKey: "true"}}})); err != nil {
			return marked, fmt.Errorf("marking %s before deleting: %w", keyOf(u), err)
		}
		marked = true
		if err := s.hook.wrote("commit", keyOf(u)); err != nil {
			return marked, err
		}
	}
	return marked, nil
}

func (s *clusterSource) committed(objs []*unstructured.Unstructured) bool {
	for _, u := range objs {
		if _, marked := u.GetAnnotations()[deletingKey]; marked {
			return true
		}
	}
	return false
}

// ownedWithin tells whether an owner of u is among uids.
func ownedWithin(u *unstructured.Unstructured, uids map[types.UID]bool) bool {
	for _, ref := range u.GetOwnerReferences() {
		if uids[ref.UID] {
			return true
		}
	}
	return false
}

// unpause undoes the move's pause in the source.
func (s *clusterSource) unpause(ctx context.Context) ([]Key, error) {
	return unpauseMoved(ctx, s.c, s.namespace, nil)
}

// clusterTarget writes copies to a management cluster.
type clusterTarget struct {
	c         client.Client
	namespace string
	// uids are the copies' UIDs, for owner references.
	uids map[Key]types.UID
	hook *writeHook
}

func (t *clusterTarget) describe() string { return "the target" }

// global tells whether the target serves a kind cluster-scoped, so that an
// owner reference to it names no namespace.
func (t *clusterTarget) global(group, kind string) bool {
	m, err := t.c.RESTMapper().RESTMapping(schema.GroupKind{Group: group, Kind: kind})
	return err == nil && m.Scope.Name() == meta.RESTScopeNameRoot
}

func (t *clusterTarget) check(ctx context.Context, objs []*unstructured.Unstructured) error {
	if err := t.prepare(ctx, objs); err != nil {
		return err
	}
	var problems []string
	for _, src := range objs {
		k := keyOf(src)
		existing, err := t.get(ctx, src.GroupVersionKind(), k)
		switch {
		case err == nil:
			if existing.GetAnnotations()[sourceUIDKey] != sourceUIDOf(src) {
				if d := differences(src, existing); len(d) > 0 {
					problems = append(problems, fmt.Sprintf("%s: the target already has an object of this name that is not a copy of the source's (%s): delete or rename it in the target", k, strings.Join(d, "; ")))
				}
			}
			continue
		case !apierrors.IsNotFound(err):
			return fmt.Errorf("reading %s in the target: %w", k, err)
		}
		// A server-side dry run: the target's validation, admission and
		// authorization answer as they would for the real write.
		obj := portable(src)
		obj.SetOwnerReferences(nil)
		if err := t.c.Create(ctx, obj, client.DryRunAll); err != nil {
			problems = append(problems, fmt.Sprintf("%s: the target refuses it: %v", k, err))
		}
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		return fmt.Errorf("the target cannot take %d objects; fix this and run the move again:\n  %s", len(problems), strings.Join(problems, "\n  "))
	}
	return nil
}

// sourceUIDOf is the UID of the object a copy of obj records: obj's own,
// or, for an object read from a directory, the one its file records.
func sourceUIDOf(obj *unstructured.Unstructured) string {
	if uid := obj.GetUID(); uid != "" {
		return string(uid)
	}
	return obj.GetAnnotations()[sourceUIDKey]
}

func (t *clusterTarget) discard(ctx context.Context, src *unstructured.Unstructured) (bool, error) {
	k := keyOf(src)
	cp, err := t.get(ctx, src.GroupVersionKind(), k)
	if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if cp.GetAnnotations()[sourceUIDKey] != sourceUIDOf(src) {
		return false, nil // not a copy of this source's object
	}
	// The copy's Cluster is paused in the target: nothing there would act
	// on its finalizers, and what it stands for lives on in the source.
	_, err = (&clusterSource{c: t.c}).remove(ctx, cp)
	return true, err
}

func (t *clusterTarget) prepare(ctx context.Context, objs []*unstructured.Unstructured) error {
	seen := map[schema.GroupVersionKind]bool{}
	namespaces := map[string]bool{}
	for _, u := range objs {
		if u.GetNamespace() != "" {
			namespaces[u.GetNamespace()] = true
		}
		gvk := u.GroupVersionKind()
		if seen[gvk] {
			continue
		}
		seen[gvk] = true
		if _, err := t.c.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
			return fmt.Errorf("the target does not serve %s %s (%v): install the same providers there first (capstan init)", gvk.Kind, gvk.GroupVersion(), err)
		}
	}
	var names []string
	for ns := range namespaces {
		names = append(names, ns)
	}
	sort.Strings(names)
	for _, ns := range names {
		err := t.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating namespace %s in the target: %w", ns, err)
		}
	}
	return nil
}

func (t *clusterTarget) get(ctx context.Context, gvk schema.GroupVersionKind, k Key) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	err := t.c.Get(ctx, client.ObjectKey{Namespace: k.Namespace, Name: k.Name}, u)
	return u, err
}

func (t *clusterTarget) has(ctx context.Context, k Key) (bool, error) {
	_, err := t.uid(ctx, k, "")
	if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
		return false, nil
	}
	return err == nil, err
}

// uid is the UID of the copy of k in the target; apiVersion helps find an
// owner that does not move now.
func (t *clusterTarget) uid(ctx context.Context, k Key, apiVersion string) (types.UID, error) {
	if uid, ok := t.uids[k]; ok {
		return uid, nil
	}
	gvk := schema.GroupVersionKind{Group: k.Group, Kind: k.Kind}
	if gv, err := schema.ParseGroupVersion(apiVersion); err == nil && apiVersion != "" {
		gvk.Version = gv.Version
	} else {
		m, err := t.c.RESTMapper().RESTMapping(gvk.GroupKind())
		if err != nil {
			return "", err
		}
		gvk = m.GroupVersionKind
	}
	u, err := t.get(ctx, gvk, k)
	if err != nil {
		return "", err
	}
	t.uids[k] = u.GetUID()
	return u.GetUID(), nil
}

func (t *clusterTarget) put(ctx context.Context, src *unstructured.Unstructured, _ int) (bool, error) {
	k := keyOf(src)
	obj := portable(src)
	refs := obj.GetOwnerReferences()
	for i := range refs {
		uid, err := t.uid(ctx, ownerKey(k.Namespace, refs[i], t.global), refs[i].APIVersion)
		if err != nil {
			return false, fmt.Errorf("finding owner %s %s in the target: %w", refs[i].Kind, refs[i].Name, err)
		}
		refs[i].UID = uid
	}
	obj.SetOwnerReferences(refs)
	status, hasStatus := obj.Object["status"]

	created := true
	err := t.c.Create(ctx, obj)
	if apierrors.IsAlreadyExists(err) {
		created = false
		existing, gerr := t.get(ctx, src.GroupVersionKind(), k)
		if gerr != nil {
			return false, gerr
		}
		if existing.GetAnnotations()[sourceUIDKey] != obj.GetAnnotations()[sourceUIDKey] {
			if d := differences(src, existing); len(d) > 0 {
				return false, fmt.Errorf("the target already has an object of this name that is not a copy of the source's (%s): delete or rename it in the target and run the move again", strings.Join(d, "; "))
			}
		}
		obj = existing
	} else if err != nil {
		return false, err
	}
	t.uids[k] = obj.GetUID()
	if !hasStatus || reflect.DeepEqual(obj.Object["status"], status) {
		return created, nil
	}
	// Status is a subresource for most kinds: written on its own, so that
	// the target's controllers adopt what exists instead of making it anew.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := t.get(ctx, src.GroupVersionKind(), k)
		if err != nil {
			return err
		}
		cur.Object["status"] = status
		err = t.c.Status().Update(ctx, cur)
		if apierrors.IsNotFound(err) {
			// No status subresource: status is part of the object.
			err = t.c.Update(ctx, cur)
		}
		return err
	})
	if err != nil {
		return created, fmt.Errorf("copying status: %w", err)
	}
	return created, nil
}

func (t *clusterTarget) differences(ctx context.Context, src *unstructured.Unstructured) ([]string, error) {
	k := keyOf(src)
	cp, err := t.get(ctx, src.GroupVersionKind(), k)
	if apierrors.IsNotFound(err) {
		return []string{"missing in the target"}, nil
	}
	if err != nil {
		return nil, err
	}
	d := differences(src, cp)
	want := map[string]bool{}
	for _, ref := range src.GetOwnerReferences() {
		uid, err := t.uid(ctx, ownerKey(k.Namespace, ref, t.global), ref.APIVersion)
		if err != nil {
			d = append(d, fmt.Sprintf("owner %s %s: %v", ref.Kind, ref.Name, err))
			continue
		}
		want[ref.Kind+"/"+ref.Name+"/"+string(uid)] = true
	}
	got := map[string]bool{}
	for _, ref := range cp.GetOwnerReferences() {
		got[ref.Kind+"/"+ref.Name+"/"+string(ref.UID)] = true
	}
	if !reflect.DeepEqual(want, got) {
		d = append(d, fmt.Sprintf("owner references point at %v, want %v", keys(got), keys(want)))
	}
	return d, nil
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// finish unpauses what a move paused in the target.
func (t *clusterTarget) finish(ctx context.Context) ([]Key, error) {
	return unpauseMoved(ctx, t.c, t.namespace, t.hook)
}

// unpauseMoved unpauses what a move paused in c: the paused annotation on
// objects first, the Clusters' spec.paused last. It returns the Clusters.
func unpauseMoved(ctx context.Context, c client.Client, namespace string, hook *writeHook) ([]Key, error) {
	kinds, err := discoverKinds(ctx, c)
	if err != nil {
		return nil, err
	}
	var out, clusters []Key
	var clusterObjs []*unstructured.Unstructured
	for _, kd := range kinds {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(kd.gvk.GroupVersion().WithKind(kd.gvk.Kind + "List"))
		var opts []client.ListOption
		if namespace != "" {
			opts = append(opts, client.InNamespace(namespace))
		}
		if err := c.List(ctx, list, opts...); err != nil {
			if meta.IsNoMatchError(err) {
				continue
			}
			return out, fmt.Errorf("listing %s: %w", kd.gvk.Kind, err)
		}
		for i := range list.Items {
			u := &list.Items[i]
			if _, ours := u.GetAnnotations()[pausedByMoveKey]; !ours {
				continue
			}
			if kd.gvk.Group == coreGroup && kd.gvk.Kind == clusterKind {
				clusterObjs = append(clusterObjs, u)
				continue
			}
			unpause := patch.Merge(map[string]any{"metadata": map[string]any{"annotations": map[string]any{pausedAnnotation: nil, pausedByMoveKey: nil}}})
			if err := c.Patch(ctx, u, unpause); err != nil {
				return out, fmt.Errorf("unpausing %s: %w", keyOf(u), err)
			}
			if err := hook.wrote("unpause", keyOf(u)); err != nil {
				return out, err
			}
		}
	}
	for _, cl := range clusterObjs {
		unpause := patch.Merge(map[string]any{"metadata": map[string]any{"annotations": map[string]any{pausedByMoveKey: nil, deletingKey: nil}}, "spec": map[string]any{"paused": nil}})
		if err := c.Patch(ctx, cl, unpause); err != nil {
			return out, fmt.Errorf("unpausing %s: %w", keyOf(cl), err)
		}
		clusters = append(clusters, keyOf(cl))
		if err := hook.wrote("unpause", keyOf(cl)); err != nil {
			return clusters, err
		}
	}
	return append(out, clusters...), nil
}
