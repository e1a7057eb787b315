package inmemory

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// resource is one kind the simulated API server serves.
type resource struct {
	gv         schema.GroupVersion
	name       string // plural, as in URLs
	kind       string
	namespaced bool
	status     bool // has a status subresource
	short      []string
}

// served are the kinds a workload cluster of Capstan's core is asked about
// (Nodes, kube-system Pods and ConfigMaps, bootstrap-token Secrets, what a
// drain looks at) plus the common ones kubectl users expect. Every kind is
// stored the same way; none has behaviour beyond what store.go gives all.
var served = []resource{
	{gv: v1, name: "namespaces", kind: "Namespace", status: true, short: []string{"ns"}},
	{gv: v1, name: "nodes", kind: "Node", status: true, short: []string{"no"}},
	{gv: v1, name: "pods", kind: "Pod", namespaced: true, status: true, short: []string{"po"}},
	{gv: v1, name: "configmaps", kind: "ConfigMap", namespaced: true, short: []string{"cm"}},
	{gv: v1, name: "secrets", kind: "Secret", namespaced: true},
	{gv: v1, name: "services", kind: "Service", namespaced: true, status: true, short: []string{"svc"}},
	{gv: v1, name: "endpoints", kind: "Endpoints", namespaced: true, short: []string{"ep"}},
	{gv: v1, name: "serviceaccounts", kind: "ServiceAccount", namespaced: true, short: []string{"sa"}},
	{gv: v1, name: "events", kind: "Event", namespaced: true, short: []string{"ev"}},
	{gv: schema.GroupVersion{Group: "apps", Version: "v1"}, name: "daemonsets", kind: "DaemonSet", namespaced: true, status: true, short: []string{"ds"}},
	{gv: schema.GroupVersion{Group: "apps", Version: "v1"}, name: "deployments", kind: "Deployment", namespaced: true, status: true, short: []string{"deploy"}},
	{gv: schema.GroupVersion{Group: "apps", Version: "v1"}, name: "replicasets", kind: "ReplicaSet", namespaced: true, status: true, short: []string{"rs"}},
	{gv: schema.GroupVersion{Group: "apps", Version: "v1"}, name: "statefulsets", kind: "StatefulSet", namespaced: true, status: true, short: []string{"sts"}},
	{gv: schema.GroupVersion{Group: "batch", Version: "v1"}, name: "jobs", kind: "Job", namespaced: true, status: true},
	{gv: schema.GroupVersion{Group: "policy", Version: "v1"}, name: "poddisruptionbudgets", kind: "PodDisruptionBudget", namespaced: true, status: true, short: []string{"pdb"}},
	{gv: schema.GroupVersion{Group: "storage.k8s.io", Version: "v1"}, name: "volumeattachments", kind: "VolumeAttachment", status: true},
	{gv: schema.GroupVersion{Group: "coordination.k8s.io", Version: "v1"}, name: "leases", kind: "Lease", namespaced: true},
	{gv: schema.GroupVersion{Group: "rbac.authorization.k8s.io", Version: "v1"}, name: "roles", kind: "Role", namespaced: true},
	{gv: schema.GroupVersion{Group: "rbac.authorization.k8s.io", Version: "v1"}, name: "rolebindings", kind: "RoleBinding", namespaced: true},
	{gv: schema.GroupVersion{Group: "rbac.authorization.k8s.io", Version: "v1"}, name: "clusterroles", kind: "ClusterRole"},
	{gv: schema.GroupVersion{Group: "rbac.authorization.k8s.io", Version: "v1"}, name: "clusterrolebindings", kind: "ClusterRoleBinding"},
}

var v1 = schema.GroupVersion{Version: "v1"}

// lookup finds a served resource by group, version and plural name.
func lookup(gv schema.GroupVersion, name string) (resource, bool) {
	for _, r := range served {
		if r.gv == gv && r.name == name {
			return r, true
		}
	}
	return resource{}, false
}

// storeKey is the store's name for a resource; groups keep kinds apart.
func (r resource) storeKey() string { return r.gv.Group + "/" + r.name }

func (r resource) gr() schema.GroupResource {
	return schema.GroupResource{Group: r.gv.Group, Resource: r.name}
}

var allVerbs = metav1.Verbs{"create", "delete", "get", "list", "patch", "update", "watch"}

// resourceList is the discovery document of one group version.
func resourceList(gv schema.GroupVersion) *metav1.APIResourceList {
	out := &metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: gv.String()}
	for _, r := range served {
		if r.gv != gv {
			continue
		}
		out.APIResources = append(out.APIResources, metav1.APIResource{
			Name: r.name, SingularName: "", Namespaced: r.namespaced, Kind: r.kind, Verbs: allVerbs, ShortNames: r.short,
		})
		if r.status {
			out.APIResources = append(out.APIResources, metav1.APIResource{
				Name: r.name + "/status", Namespaced: r.namespaced, Kind: r.kind, Verbs: metav1.Verbs{"get", "patch", "update"},
			})
		}
		if r.name == "pods" {
			out.APIResources = append(out.APIResources, metav1.APIResource{
				Name: "pods/eviction", Namespaced: true, Group: "policy", Version: "v1", Kind: "Eviction", Verbs: metav1.Verbs{"create"},
			})
		}
	}
	return out
}

// groupList is the discovery document of /apis.
func groupList() *metav1.APIGroupList {
	out := &metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}}
	seen := map[string]bool{}
	for _, r := range served {
		if r.gv.Group == "" || seen[r.gv.Group] {
			continue
		}
		seen[r.gv.Group] = true
		out.Groups = append(out.Groups, group(r.gv))
	}
	return out
}

func group(gv schema.GroupVersion) metav1.APIGroup {
	v := metav1.GroupVersionForDiscovery{GroupVersion: gv.String(), Version: gv.Version}
	return metav1.APIGroup{TypeMeta: metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}, Name: gv.Group, Versions: []metav1.GroupVersionForDiscovery{v}, PreferredVersion: v}
}
