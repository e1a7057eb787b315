package move

import (
	"context"
	"fmt"
	"sort"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Labels that select what moves, as clusterctl defines them.
const (
	// MoveLabel on an object moves it (and, through owner references, what
	// it owns); on a CRD it moves every object of the kind.
	MoveLabel = "clusterctl.cluster.x-k8s.io/move"
	// MoveHierarchyLabel on a CRD moves every object of the kind and
	// everything those objects own.
	MoveHierarchyLabel = "clusterctl.cluster.x-k8s.io/move-hierarchy"

	contractLabel    = "cluster.x-k8s.io/v1beta2"
	providerLabel    = "cluster.x-k8s.io/provider"
	clusterctlLabel  = "clusterctl.cluster.x-k8s.io"
	clusterNameLabel = "cluster.x-k8s.io/cluster-name"
	coreGroup        = "cluster.x-k8s.io"
	annotationPrefix = "move.capstan.dev/"
	sourceUIDKey     = annotationPrefix + "source-uid"
	pausedByMoveKey  = annotationPrefix + "paused"
	// deletingKey marks the roots of a graph whose move has begun
	// deleting from the source, past the point an undo can restore.
	deletingKey      = annotationPrefix + "deleting"
	pausedAnnotation = "cluster.x-k8s.io/paused"
	clusterKind      = "Cluster"
	secretKind       = "Secret"
	configMapKind    = "ConfigMap"
)

// clusterSecretSuffixes name the Secrets Cluster API keeps per cluster.
var clusterSecretSuffixes = []string{"-kubeconfig", "-ca", "-etcd", "-proxy", "-sa", "-cca"}

// kind is one kind of object a move considers.
type kind struct {
	gvk schema.GroupVersionKind
	// all moves every object of the kind (its CRD is labelled for move).
	all bool
	// global kinds are cluster-scoped: their objects are listed whatever
	// the move's namespace, and move only when selected (see doc.go).
	global bool
}

// discoverKinds lists the kinds a move considers: Secrets, ConfigMaps and
// every custom kind, namespaced or cluster-scoped, whose CRD carries a
// Cluster API contract, provider or clusterctl label (clusterctl's own
// inventory excepted), at the version the contract label names (else the
// storage version).
func discoverKinds(ctx context.Context, c client.Client) ([]kind, error) {
	crds := &apiextensionsv1.CustomResourceDefinitionList{}
	if err := c.List(ctx, crds); err != nil {
		return nil, fmt.Errorf("listing CRDs: %w", err)
	}
	kinds := []kind{
		{gvk: schema.GroupVersionKind{Version: "v1", Kind: secretKind}},
		{gvk: schema.GroupVersionKind{Version: "v1", Kind: configMapKind}},
	}
	for _, crd := range crds.Items {
		if !selected(crd.Labels) {
			continue
		}
		version := ""
		served := map[string]bool{}
		for _, v := range crd.Spec.Versions {
			if v.Served {
				served[v.Name] = true
			}
			if v.Storage {
				version = v.Name
			}
		}
		// The contract label's value lists the versions that implement
		// the contract ("v1beta1_v1beta2"); the last is the newest.
		if vs := strings.Split(crd.Labels[contractLabel], "_"); len(vs) > 0 && served[vs[len(vs)-1]] {
			version = vs[len(vs)-1]
		}
		if version == "" || !served[version] {
			continue
		}
		_, move := crd.Labels[MoveLabel]
		_, hierarchy := crd.Labels[MoveHierarchyLabel]
		kinds = append(kinds, kind{
			gvk:    schema.GroupVersionKind{Group: crd.Spec.Group, Version: version, Kind: crd.Spec.Names.Kind},
			all:    move || hierarchy,
			global: crd.Spec.Scope == apiextensionsv1.ClusterScoped,
		})
	}
	return kinds, nil
}

// clusterctlCoreLabel marks clusterctl's own objects, such as its inventory
// CRD; clusterctl never moves them, and each management cluster records its
// own providers.
const clusterctlCoreLabel = "clusterctl.cluster.x-k8s.io/core"

func selected(labels map[string]string) bool {
	if _, ok := labels[clusterctlCoreLabel]; ok {
		return false
	}
	for l := range labels {
		if l == contractLabel || l == providerLabel || l == clusterctlLabel || strings.HasPrefix(l, clusterctlLabel+"/") {
			return true
		}
	}
	return false
}

// keyOf names an unstructured object.
func keyOf(u *unstructured.Unstructured) Key {
	return Key{Group: u.GroupVersionKind().Group, Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName()}
}

// ownerKeys names an object's owners. An owner reference names no
// namespace: the owner is in the object's own namespace, unless the owner's
// kind is cluster-scoped (global tells), and a cluster-scoped object may
// only have cluster-scoped owners.
func ownerKeys(u *unstructured.Unstructured, global func(group, kind string) bool) []Key {
	var out []Key
	for _, ref := range u.GetOwnerReferences() {
		out = append(out, ownerKey(u.GetNamespace(), ref, global))
	}
	return out
}

func ownerKey(namespace string, ref metav1.OwnerReference, global func(group, kind string) bool) Key {
	gv, _ := schema.ParseGroupVersion(ref.APIVersion)
	if global != nil && global(gv.Group, ref.Kind) {
		namespace = ""
	}
	return Key{Group: gv.Group, Kind: ref.Kind, Namespace: namespace, Name: ref.Name}
}

// globalKinds tells which kinds among objs are cluster-scoped.
func globalKinds(objs []*unstructured.Unstructured) func(group, kind string) bool {
	kinds := map[schema.GroupKind]bool{}
	for _, u := range objs {
		if u.GetNamespace() == "" {
			kinds[u.GroupVersionKind().GroupKind()] = true
		}
	}
	return func(group, kind string) bool { return kinds[schema.GroupKind{Group: group, Kind: kind}] }
}

// discover lists the objects of the graph of every Cluster in namespace
// ("" for all) in the source.
func discover(ctx context.Context, c client.Client, namespace string) ([]*unstructured.Unstructured, error) {
	kinds, err := discoverKinds(ctx, c)
	if err != nil {
		return nil, err
	}
	var all []*unstructured.Unstructured
	byKey := map[Key]*unstructured.Unstructured{}
	byUID := map[types.UID]*unstructured.Unstructured{}
	in := map[Key]bool{}
	for _, kd := range kinds {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(kd.gvk.GroupVersion().WithKind(kd.gvk.Kind + "List"))
		var opts []client.ListOption
		if namespace != "" && !kd.global {
			opts = append(opts, client.InNamespace(namespace))
		}
		if err := c.List(ctx, list, opts...); err != nil {
			return nil, fmt.Errorf("listing %s: %w", kd.gvk.Kind, err)
		}
		for i := range list.Items {
			u := &list.Items[i]
			u.SetGroupVersionKind(kd.gvk)
			all = append(all, u)
			byKey[keyOf(u)] = u
			byUID[u.GetUID()] = u
			// A global object moves only when selected (or owned by one
			// that is, below); a --namespace move takes every selected
			// one, as which of them its clusters use is not known.
			_, labelled := u.GetLabels()[MoveLabel]
			// A root marked by a move that has begun deleting belongs to
			// it, whatever referenced it may be gone already.
			_, marked := u.GetAnnotations()[deletingKey]
			if kd.all || labelled || (!kd.global && (marked || kd.gvk.Group == coreGroup && kd.gvk.Kind == clusterKind)) {
				in[keyOf(u)] = true
			}
		}
	}

	// Grow the graph until nothing more belongs to it.
	for changed := true; changed; {
		changed = false
		add := func(k Key) {
			if _, exists := byKey[k]; exists && !in[k] {
				in[k] = true
				changed = true
			}
		}
		for _, u := range all {
			k := keyOf(u)
			if in[k] {
				for _, r := range references(u) {
					add(r)
				}
				if k.Group == coreGroup && k.Kind == clusterKind {
					for _, s := range clusterSecretSuffixes {
						add(Key{Kind: secretKind, Namespace: k.Namespace, Name: k.Name + s})
					}
				}
				continue
			}
			if name := u.GetLabels()[clusterNameLabel]; name != "" && in[Key{Group: coreGroup, Kind: clusterKind, Namespace: k.Namespace, Name: name}] {
				add(k)
				continue
			}
			for _, ref := range u.GetOwnerReferences() {
				if o, ok := byUID[ref.UID]; ok && in[keyOf(o)] {
					add(k)
					break
				}
			}
		}
	}
	var out []*unstructured.Unstructured
	for _, u := range all {
		if in[keyOf(u)] {
			out = append(out, u)
		}
	}
	sort.Slice(out, func(i, j int) bool { return keyOf(out[i]).String() < keyOf(out[j]).String() })
	return out, nil
}

// references are the objects an object names in its spec (contract
// references such as infrastructureRef, configRef, machineTemplate's
// infrastructureRef) and the bootstrap data Secret it names.
func references(u *unstructured.Unstructured) []Key {
	var out []Key
	var walk func(v any)
	walk = func(v any) {
		switch t := v.(type) {
		case map[string]any:
			kind, _ := t["kind"].(string)
			name, _ := t["name"].(string)
			group, hasGroup := t["apiGroup"].(string)
			if apiVersion, ok := t["apiVersion"].(string); ok && !hasGroup {
				gv, _ := schema.ParseGroupVersion(apiVersion)
				group, hasGroup = gv.Group, true
			}
			if kind != "" && name != "" && hasGroup {
				ns, _ := t["namespace"].(string)
				if ns == "" || ns == u.GetNamespace() {
					out = append(out, Key{Group: group, Kind: kind, Namespace: u.GetNamespace(), Name: name})
				}
			}
			for _, child := range t {
				walk(child)
			}
		case []any:
			for _, child := range t {
				walk(child)
			}
		}
	}
	walk(u.Object["spec"])
	// A Cluster names its ClusterClass without kind or group.
	if u.GetKind() == clusterKind && u.GroupVersionKind().Group == coreGroup {
		if name, _, _ := unstructured.NestedString(u.Object, "spec", "topology", "classRef", "name"); name != "" {
			ns, _, _ := unstructured.NestedString(u.Object, "spec", "topology", "classRef", "namespace")
			if ns == "" || ns == u.GetNamespace() {
				out = append(out, Key{Group: coreGroup, Kind: "ClusterClass", Namespace: u.GetNamespace(), Name: name})
			}
		}
	}
	for _, path := range [][]string{{"spec", "bootstrap", "dataSecretName"}, {"status", "dataSecretName"}} {
		if name, _, _ := unstructured.NestedString(u.Object, path...); name != "" {
			out = append(out, Key{Kind: secretKind, Namespace: u.GetNamespace(), Name: name})
		}
	}
	return out
}
