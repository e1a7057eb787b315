package webhook

import (
	"context"
	"fmt"
	"net/http"
	"sort"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/topology/patches"
	"capstan.dev/capstan/internal/topology/variables"
)

// clusterClassValidator refuses a class whose variable definitions or
// patches are broken, a change that takes from a class in use a worker class or a
// variable one of its Clusters uses, and the deletion of a class in use.
type clusterClassValidator struct{ s *Server }

func (v *clusterClassValidator) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation == admissionv1.Delete {
		old, clusters, resp := v.old(ctx, req)
		if old == nil {
			return resp
		}
		if len(clusters) > 0 {
			return refuse(apierrors.NewForbidden(clusterv1.GroupVersion.WithResource("clusterclasses").GroupResource(), old.Name,
				fmt.Errorf("it is used by Cluster(s) %s: delete those Clusters or move them to another class first", clusterNames(pointers(clusters)))))
		}
		return admission.Allowed("")
	}
	cc := &clusterv1.ClusterClass{}
	if err := v.s.decoder.DecodeRaw(req.Object, cc); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	_, errs := variables.Definitions(cc)
	errs = append(errs, patches.ValidateClass(cc)...)
	errs = append(errs, uniqueClasses(cc)...)
	errs = append(errs, classShape(cc)...)
	errs = append(errs, kubernetesVersionsValid(cc.Spec.KubernetesVersions)...)
	if req.Operation == admissionv1.Update {
		old, clusters, resp := v.old(ctx, req)
		if old == nil {
			return resp
		}
		errs = append(errs, classesCompatible(old, cc)...)
		errs = append(errs, removalsInUse(old, cc, clusters)...)
		errs = append(errs, versionsInUse(cc, clusters)...)
		errs = append(errs, healthChecksInUse(old, cc, clusters)...)
		errs = append(errs, autoscalerInUse(cc, clusters)...)
	}
	if len(errs) > 0 {
		return refuse(apierrors.NewInvalid(clusterClassKind, cc.Name, errs))
	}
	return admission.Allowed("")
}

// old reads the class as it was and the Clusters that use it; on failure
// the class is nil and the response says why.
func (v *clusterClassValidator) old(ctx context.Context, req admission.Request) (*clusterv1.ClusterClass, []clusterv1.Cluster, admission.Response) {
	old := &clusterv1.ClusterClass{}
	if err := v.s.decoder.DecodeRaw(req.OldObject, old); err != nil {
		return nil, nil, admission.Errored(http.StatusBadRequest, err)
	}
	clusters, err := v.s.clustersUsing(ctx, old)
	if err != nil {
		return nil, nil, admission.Errored(http.StatusInternalServerError, err)
	}
	return old, clusters, admission.Response{}
}

func pointers(clusters []clusterv1.Cluster) []*clusterv1.Cluster {
	out := make([]*clusterv1.Cluster, len(clusters))
	for i := range clusters {
		out[i] = &clusters[i]
	}
	return out
}

// uniqueClasses refuses two worker classes of the same name: a topology
// could not tell them apart.
func uniqueClasses(cc *clusterv1.ClusterClass) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, md := range cc.Spec.Workers.MachineDeployments {
		if seen[md.Class] {
			errs = append(errs, field.Duplicate(field.NewPath("spec", "workers", "machineDeployments").Index(i).Child("class"), md.Class))
		}
		seen[md.Class] = true
	}
	seen = map[string]bool{}
	for i, mp := range cc.Spec.Workers.MachinePools {
		if seen[mp.Class] {
			errs = append(errs, field.Duplicate(field.NewPath("spec", "workers", "machinePools").Index(i).Child("class"), mp.Class))
		}
		seen[mp.Class] = true
	}
	return errs
}

// removalsInUse refuses the worker classes and variables that the change
// from old to cc removes while one of clusters uses them; each error names
// the Clusters.
func removalsInUse(old, cc *clusterv1.ClusterClass, clusters []clusterv1.Cluster) field.ErrorList {
	var errs field.ErrorList
	removed := func(before, after []string) map[string]bool {
		out := map[string]bool{}
		for _, b := range before {
			out[b] = true
		}
		for _, a := range after {
			delete(out, a)
		}
		return out
	}
	mdGone := removed(mdClassNames(old), mdClassNames(cc))
	mpGone := removed(mpClassNames(old), mpClassNames(cc))
	varGone := removed(variableNames(old), variableNames(cc))
	if len(mdGone)+len(mpGone)+len(varGone) == 0 {
		return nil
	}
	users := map[string]map[string][]*clusterv1.Cluster{"md": {}, "mp": {}, "var": {}}
	note := func(kind, name string, c *clusterv1.Cluster) {
		list := users[kind][name]
		if len(list) == 0 || list[len(list)-1] != c {
			users[kind][name] = append(list, c)
		}
	}
	for i := range clusters {
		c := &clusters[i]
		t := &c.Spec.Topology
		for _, md := range t.Workers.MachineDeployments {
			if mdGone[md.Class] {
				note("md", md.Class, c)
			}
			for _, v := range md.Variables.Overrides {
				if varGone[v.Name] {
					note("var", v.Name, c)
				}
			}
		}
		for _, mp := range t.Workers.MachinePools {
			if mpGone[mp.Class] {
				note("mp", mp.Class, c)
			}
			for _, v := range mp.Variables.Overrides {
				if varGone[v.Name] {
					note("var", v.Name, c)
				}
			}
		}
		for _, list := range [][]clusterv1.ClusterVariable{t.Variables, t.ControlPlane.Variables.Overrides} {
			for _, v := range list {
				if varGone[v.Name] {
					note("var", v.Name, c)
				}
			}
		}
	}
	report := func(kind string, path *field.Path, what string) {
		names := make([]string, 0, len(users[kind]))
		for n := range users[kind] {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			errs = append(errs, field.Forbidden(path, fmt.Sprintf("%s %q cannot be removed: Cluster(s) %s use it; change those Clusters first, or keep it",
				what, n, clusterNames(users[kind][n]))))
		}
	}
	report("md", field.NewPath("spec", "workers", "machineDeployments"), "machineDeployments class")
	report("mp", field.NewPath("spec", "workers", "machinePools"), "machinePools class")
	report("var", field.NewPath("spec", "variables"), "variable")
	return errs
}

// versionsInUse refuses a list of kubernetesVersions that leaves out the
// version a Cluster of the class runs: the Cluster could be neither kept
// nor upgraded along the list.
func versionsInUse(cc *clusterv1.ClusterClass, clusters []clusterv1.Cluster) field.ErrorList {
	if len(cc.Spec.KubernetesVersions) == 0 {
		return nil
	}
	listed := map[string]bool{}
	for _, v := range cc.Spec.KubernetesVersions {
		listed[v] = true
	}
	users := map[string][]*clusterv1.Cluster{}
	var missing []string
	for i := range clusters {
		v := clusters[i].Spec.Topology.Version
		if listed[v] {
			continue
		}
		if len(users[v]) == 0 {
			missing = append(missing, v)
		}
		users[v] = append(users[v], &clusters[i])
	}
	sort.Strings(missing)
	var errs field.ErrorList
	for _, v := range missing {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "kubernetesVersions"),
			fmt.Sprintf("must list %s: Cluster(s) %s run it; add it, or upgrade those Clusters first", v, clusterNames(users[v]))))
	}
	return errs
}

func mdClassNames(cc *clusterv1.ClusterClass) []string {
	var out []string
	for _, c := range cc.Spec.Workers.MachineDeployments {
		out = append(out, c.Class)
	}
	return out
}

func mpClassNames(cc *clusterv1.ClusterClass) []string {
	var out []string
	for _, c := range cc.Spec.Workers.MachinePools {
		out = append(out, c.Class)
	}
	return out
}

func variableNames(cc *clusterv1.ClusterClass) []string {
	var out []string
	for _, v := range cc.Spec.Variables {
		out = append(out, v.Name)
	}
	return out
}
