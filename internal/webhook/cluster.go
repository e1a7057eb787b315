package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/version"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/topology/variables"
)

var topologyPath = field.NewPath("spec", "topology")

// decodeClusters reads the request's Cluster and, on update, the old one.
func (s *Server) decodeClusters(req admission.Request) (cluster, old *clusterv1.Cluster, err error) {
	cluster = &clusterv1.Cluster{}
	if err := s.decoder.DecodeRaw(req.Object, cluster); err != nil {
		return nil, nil, err
	}
	if req.Operation == admissionv1.Update && len(req.OldObject.Raw) > 0 {
		old = &clusterv1.Cluster{}
		if err := s.decoder.DecodeRaw(req.OldObject, old); err != nil {
			return nil, nil, err
		}
	}
	return cluster, old, nil
}

// clusterDefaulter fills a topology Cluster's defaults: a "v" before a bare
// version, and the variables' defaults from its class. It also checks the
// variables, here rather than in the validating webhook, so that defaults
// and checks come from the same copy of the class.
type clusterDefaulter struct{ s *Server }

func (d *clusterDefaulter) Handle(ctx context.Context, req admission.Request) admission.Response {
	cluster, old, err := d.s.decodeClusters(req)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	t := &cluster.Spec.Topology
	if !t.IsDefined() || !cluster.DeletionTimestamp.IsZero() {
		// A Cluster being deleted is let go: refusing a controller's
		// removal of its finalizer would keep it for ever.
		return admission.Allowed("")
	}
	if t.Version != "" && !strings.HasPrefix(t.Version, "v") {
		t.Version = "v" + t.Version
	}
	if t.ClassRef.Name == "" {
		return refuse(apierrors.NewInvalid(clusterKind, cluster.Name, field.ErrorList{
			field.Required(topologyPath.Child("classRef", "name"), "name the ClusterClass the Cluster is built from"),
		}))
	}
	var warnings []string
	cc, state, err := d.s.class(ctx, cluster.GetClassKey())
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	if state == classReady {
		if errs := defaultVariables(cluster, cc.Status.Variables); len(errs) > 0 {
			return refuse(apierrors.NewInvalid(clusterKind, cluster.Name, errs))
		}
		// Values the Cluster already had were checked when they were
		// written: a class changed since must not block every other write
		// to the Cluster (a label, a controller's finalizer).
		if old == nil || !equality.Semantic.DeepEqual(old.Spec.Topology, cluster.Spec.Topology) {
			if errs := variables.ValidateCluster(cc.Status.Variables, cluster, old); len(errs) > 0 {
				return refuse(apierrors.NewInvalid(clusterKind, cluster.Name, errs))
			}
		}
	} else {
		warnings = append(warnings, classWarning(cluster.GetClassKey(), state))
	}
	patched, err := patchTopology(req.Object.Raw, cluster)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	return admission.PatchResponseFromRaw(req.Object.Raw, patched).WithWarnings(warnings...)
}

// defaultVariables applies the definitions' defaults to the Cluster's
// values and to the values of its overrides (inside the values an override
// list holds: a variable it does not name keeps the Cluster's value).
func defaultVariables(cluster *clusterv1.Cluster, defs []clusterv1.ClusterClassStatusVariable) field.ErrorList {
	t := &cluster.Spec.Topology
	var errs field.ErrorList
	values, e := variables.Default(defs, t.Variables, topologyPath.Child("variables"))
	errs = append(errs, e...)
	if len(e) == 0 {
		t.Variables = values
	}
	overrides := func(list *[]clusterv1.ClusterVariable, path *field.Path) {
		if len(*list) == 0 {
			return
		}
		out, e := variables.DefaultOverrides(defs, *list, path)
		errs = append(errs, e...)
		if len(e) == 0 {
			*list = out
		}
	}
	overrides(&t.ControlPlane.Variables.Overrides, topologyPath.Child("controlPlane", "variables", "overrides"))
	for i := range t.Workers.MachineDeployments {
		md := &t.Workers.MachineDeployments[i]
		overrides(&md.Variables.Overrides, topologyPath.Child("workers", "machineDeployments").Key(md.Name).Child("variables", "overrides"))
	}
	for i := range t.Workers.MachinePools {
		mp := &t.Workers.MachinePools[i]
		overrides(&mp.Variables.Overrides, topologyPath.Child("workers", "machinePools").Key(mp.Name).Child("variables", "overrides"))
	}
	return errs
}

// patchTopology writes the defaulted fields of cluster into the raw object
// and nothing else, so that the patch never touches a field the webhook did
// not mean to change.
func patchTopology(raw []byte, cluster *clusterv1.Cluster) ([]byte, error) {
	obj := map[string]any{}
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, err
	}
	topology, ok := nested(obj, "spec", "topology")
	if !ok {
		return raw, nil
	}
	t := cluster.Spec.Topology
	topology["version"] = t.Version
	set := func(m map[string]any, key string, values []clusterv1.ClusterVariable) error {
		if len(values) == 0 {
			return nil
		}
		b, err := json.Marshal(values)
		if err != nil {
			return err
		}
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			return err
		}
		m[key] = v
		return nil
	}
	if err := set(topology, "variables", t.Variables); err != nil {
		return nil, err
	}
	if cp, ok := nested(topology, "controlPlane", "variables"); ok {
		if err := set(cp, "overrides", t.ControlPlane.Variables.Overrides); err != nil {
			return nil, err
		}
	}
	workers := func(list string, overrides map[string][]clusterv1.ClusterVariable) error {
		items, _ := nestedList(topology, "workers", list)
		for _, item := range items {
			m, ok := item.(map[string]any)
			if !ok {
				continue
			}
			name, _ := m["name"].(string)
			if vars, ok := nested(m, "variables"); ok {
				if err := set(vars, "overrides", overrides[name]); err != nil {
					return err
				}
			}
		}
		return nil
	}
	mds, mps := map[string][]clusterv1.ClusterVariable{}, map[string][]clusterv1.ClusterVariable{}
	for _, md := range t.Workers.MachineDeployments {
		mds[md.Name] = md.Variables.Overrides
	}
	for _, mp := range t.Workers.MachinePools {
		mps[mp.Name] = mp.Variables.Overrides
	}
	if err := workers("machineDeployments", mds); err != nil {
		return nil, err
	}
	if err := workers("machinePools", mps); err != nil {
		return nil, err
	}
	return json.Marshal(obj)
}

func nested(m map[string]any, path ...string) (map[string]any, bool) {
	for _, p := range path {
		next, ok := m[p].(map[string]any)
		if !ok {
			return nil, false
		}
		m = next
	}
	return m, true
}

func nestedList(m map[string]any, path ...string) ([]any, bool) {
	parent, ok := nested(m, path[:len(path)-1]...)
	if !ok {
		return nil, false
	}
	l, ok := parent[path[len(path)-1]].([]any)
	return l, ok
}

// clusterValidator refuses topology Clusters that cannot work: no class
// name, a version that is not one, worker topologies that name classes the
// ClusterClass lacks, replicas the cluster autoscaler owns, version changes
// upstream forbids (among them a new version while the previous upgrade is
// under way), a rebase onto a class the Cluster's objects cannot follow, a
// topology added to or removed from an existing Cluster.
type clusterValidator struct{ s *Server }

func (v *clusterValidator) Handle(ctx context.Context, req admission.Request) admission.Response {
	cluster, old, err := v.s.decodeClusters(req)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	warnings, errs, err := v.s.validateCluster(ctx, cluster, old)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	if len(errs) > 0 {
		return refuse(apierrors.NewInvalid(clusterKind, cluster.Name, errs), warnings...)
	}
	return admission.Allowed("").WithWarnings(warnings...)
}

func (s *Server) validateCluster(ctx context.Context, cluster, old *clusterv1.Cluster) ([]string, field.ErrorList, error) {
	t := &cluster.Spec.Topology
	var errs field.ErrorList
	if old != nil && old.Spec.Topology.IsDefined() && !t.IsDefined() {
		errs = append(errs, field.Forbidden(topologyPath, "cannot be removed from an existing Cluster: the Cluster's objects are managed from its ClusterClass; delete the Cluster instead"))
		return nil, errs, nil
	}
	if !t.IsDefined() || !cluster.DeletionTimestamp.IsZero() {
		return nil, nil, nil
	}
	concurrency := clusterv1.ClusterTopologyUpgradeConcurrencyAnnotation
	if old != nil && equality.Semantic.DeepEqual(old.Spec.Topology, cluster.Spec.Topology) && old.Annotations[concurrency] == cluster.Annotations[concurrency] {
		// Nothing checked here changed: what was admitted stays admitted,
		// whatever became of the class since.
		return nil, nil, nil
	}
	var warnings []string
	// adopting: a topology added to a Cluster created without one, which
	// only the unsafe class-name annotation allows; there is no old
	// version to compare with.
	adopting := old != nil && (!old.Spec.Topology.IsDefined() || old.Spec.Topology.ClassRef.Name == "")
	if adopting {
		if _, ok := cluster.Annotations[clusterv1.ClusterTopologyUnsafeUpdateClassNameAnnotation]; !ok {
			errs = append(errs, field.Forbidden(topologyPath.Child("classRef"), "cannot be set on an existing Cluster that was created without a topology: create a new Cluster from the ClusterClass (or, at your own risk, set the annotation "+
				clusterv1.ClusterTopologyUnsafeUpdateClassNameAnnotation+")"))
			return nil, errs, nil
		}
		warnings = append(warnings, fmt.Sprintf("annotation %s is set: a topology was added to a Cluster created without one; nothing checked that the objects the Cluster already has match the ClusterClass",
			clusterv1.ClusterTopologyUnsafeUpdateClassNameAnnotation))
	}
	for _, msg := range validation.IsValidLabelValue(cluster.Name) {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), cluster.Name, "must be a valid label value: "+msg))
	}
	if t.ClassRef.Name == "" {
		errs = append(errs, field.Required(topologyPath.Child("classRef", "name"), "name the ClusterClass the Cluster is built from"))
		return nil, errs, nil
	}
	newVersion, verr := parseVersion(t.Version)
	if verr != nil {
		errs = append(errs, field.Invalid(topologyPath.Child("version"), t.Version, "must be a Kubernetes version such as v1.33.1: "+verr.Error()))
	}
	if c, ok := cluster.Annotations[clusterv1.ClusterTopologyUpgradeConcurrencyAnnotation]; ok {
		if n, err := strconv.Atoi(c); err != nil || n < 1 {
			errs = append(errs, field.Invalid(field.NewPath("metadata", "annotations").Key(clusterv1.ClusterTopologyUpgradeConcurrencyAnnotation), c,
				"must be a whole number of at least 1: how many MachineDeployments (and MachinePools) upgrade at once"))
		}
	}
	errs = append(errs, uniqueNames(t)...)

	key := cluster.GetClassKey()
	cc, state, err := s.class(ctx, key)
	if err != nil {
		return nil, nil, err
	}
	errs = append(errs, autoscalerConflicts(cluster, cc)...)
	errs = append(errs, topologyShape(t, cc)...)
	if cc == nil {
		if old != nil {
			errs = append(errs, field.Invalid(topologyPath.Child("classRef"), key.String(),
				fmt.Sprintf("ClusterClass %s does not exist: create it again, or point classRef at an existing class", key)))
			return warnings, errs, nil
		}
		// Upstream lets a Cluster wait for its class: the topology
		// controller reports it until the class exists.
		return append(warnings, classWarning(key, state)), errs, nil
	}
	if state != classReady {
		warnings = append(warnings, classWarning(key, state))
	}
	errs = append(errs, validateAgainstClass(cluster, cc)...)
	if old != nil && !adopting && old.GetClassKey() != key {
		e, err := s.checkRebase(ctx, old.GetClassKey(), cc)
		if err != nil {
			return nil, nil, err
		}
		errs = append(errs, e...)
	}

	if old != nil && !adopting && verr == nil && t.Version != old.Spec.Topology.Version {
		w, e, err := s.checkVersionChange(ctx, cluster, old, cc, newVersion)
		if err != nil {
			return nil, nil, err
		}
		warnings = append(warnings, w...)
		if e != nil {
			errs = append(errs, e)
		}
	}
	return warnings, errs, nil
}

// checkRebase checks a Cluster's move from the class named from to cc:
// the objects the old class made must be able to follow the new one.
func (s *Server) checkRebase(ctx context.Context, from types.NamespacedName, cc *clusterv1.ClusterClass) (field.ErrorList, error) {
	path := topologyPath.Child("classRef")
	old := &clusterv1.ClusterClass{}
	if err := s.live.Get(ctx, from, old); err != nil {
		if apierrors.IsNotFound(err) {
			return field.ErrorList{field.Forbidden(path, fmt.Sprintf(
				"the Cluster cannot move from ClusterClass %s, which does not exist, to %s/%s: whether its objects can follow cannot be checked; create the old class again first", from, cc.Namespace, cc.Name))}, nil
		}
		return nil, fmt.Errorf("reading ClusterClass %s: %w", from, err)
	}
	var errs field.ErrorList
	for _, e := range classesCompatible(old, cc) {
		errs = append(errs, field.Forbidden(path, fmt.Sprintf("cannot move from ClusterClass %s to %s/%s: %s", from, cc.Namespace, cc.Name, e.Error())))
	}
	return errs, nil
}

// checkVersionChange checks a change of spec.topology.version from old's:
// no downgrade, no skipped minor (unless the class chains upgrades), and no
// change while the previous upgrade is under way — unless the unsafe version
// annotation turns the checks off, which is warned about.
func (s *Server) checkVersionChange(ctx context.Context, cluster, old *clusterv1.Cluster, cc *clusterv1.ClusterClass, newVersion *version.Version) ([]string, *field.Error, error) {
	if _, ok := cluster.Annotations[clusterv1.ClusterTopologyUnsafeUpdateVersionAnnotation]; ok {
		return []string{fmt.Sprintf("annotation %s is set: the change of spec.topology.version from %s to %s was not checked (downgrade, skipped minor, upgrade under way)",
			clusterv1.ClusterTopologyUnsafeUpdateVersionAnnotation, old.Spec.Topology.Version, cluster.Spec.Topology.Version)}, nil, nil
	}
	oldVersion, err := parseVersion(old.Spec.Topology.Version)
	if err != nil {
		// The old version was refused when it was written; nothing to
		// compare with.
		return nil, nil, nil
	}
	ceiling := len(cc.Spec.KubernetesVersions) == 0 && cc.Spec.Upgrade.External.GenerateUpgradePlanExtension == ""
	if e := versionChange(newVersion, oldVersion, cluster.Spec.Topology.Version, ceiling); e != nil {
		return nil, e, nil
	}
	st, err := s.readUpgradeState(ctx, old)
	if err != nil {
		return nil, nil, err
	}
	previous := old.Spec.Topology.Version
	return nil, upgradeRefusal(cluster.Spec.Topology.Version, previous, upgradeUnderWay(previous, st)), nil
}

// parseVersion reads a topology version: "v" and a semantic version.
func parseVersion(s string) (*version.Version, error) {
	if !strings.HasPrefix(s, "v") {
		return nil, fmt.Errorf("it must start with v")
	}
	return version.ParseSemantic(s)
}

// versionChange refuses a version lowered, or raised by two minors or more
// when the class cannot chain the upgrade (it lists no kubernetesVersions
// and has no upgrade plan extension). Pre-releases do not count.
func versionChange(newV, oldV *version.Version, value string, ceiling bool) *field.Error {
	path := topologyPath.Child("version")
	n := version.MajorMinor(newV.Major(), newV.Minor()).WithPatch(newV.Patch())
	o := version.MajorMinor(oldV.Major(), oldV.Minor()).WithPatch(oldV.Patch())
	if n.LessThan(o) {
		return field.Invalid(path, value, fmt.Sprintf("cannot be lowered from v%s: Kubernetes does not support downgrades; set it back to v%s or higher", o, o))
	}
	if ceiling && !n.LessThan(version.MajorMinor(o.Major(), o.Minor()+2)) {
		return field.Invalid(path, value, fmt.Sprintf("cannot be raised from v%s by more than one minor version at a time: upgrade to v%d.%d.x first, or list the versions in between in the ClusterClass's kubernetesVersions",
			o, o.Major(), o.Minor()+1))
	}
	return nil
}

// uniqueNames refuses two worker topologies of the same name.
func uniqueNames(t *clusterv1.Topology) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, md := range t.Workers.MachineDeployments {
		if seen[md.Name] {
			errs = append(errs, field.Duplicate(topologyPath.Child("workers", "machineDeployments").Index(i).Child("name"), md.Name))
		}
		seen[md.Name] = true
	}
	seen = map[string]bool{}
	for i, mp := range t.Workers.MachinePools {
		if seen[mp.Name] {
			errs = append(errs, field.Duplicate(topologyPath.Child("workers", "machinePools").Index(i).Child("name"), mp.Name))
		}
		seen[mp.Name] = true
	}
	return errs
}

// validateAgainstClass checks the topology against its class: the version
// one the class lists (when it lists any), every worker topology's class one
// the class defines, health checks enabled only where there is one.
func validateAgainstClass(cluster *clusterv1.Cluster, cc *clusterv1.ClusterClass) field.ErrorList {
	t := &cluster.Spec.Topology
	var errs field.ErrorList
	classKey := cc.Namespace + "/" + cc.Name
	if len(cc.Spec.KubernetesVersions) > 0 && !contains(cc.Spec.KubernetesVersions, t.Version) {
		errs = append(errs, field.NotSupported(topologyPath.Child("version"), t.Version, cc.Spec.KubernetesVersions))
	}
	mdClasses := map[string]*clusterv1.MachineDeploymentClass{}
	var mdNames []string
	for i := range cc.Spec.Workers.MachineDeployments {
		c := &cc.Spec.Workers.MachineDeployments[i]
		mdClasses[c.Class] = c
		mdNames = append(mdNames, strconv.Quote(c.Class))
	}
	for _, md := range t.Workers.MachineDeployments {
		path := topologyPath.Child("workers", "machineDeployments").Key(md.Name)
		class, ok := mdClasses[md.Class]
		if !ok {
			errs = append(errs, field.Invalid(path.Child("class"), md.Class,
				fmt.Sprintf("ClusterClass %s has no machineDeployments class of this name: use one of [%s] or add it to the class", classKey, strings.Join(mdNames, ", "))))
			continue
		}
		if ptrTrue(md.HealthCheck.Enabled) && !md.HealthCheck.IsDefined() && isZero(class.HealthCheck) {
			errs = append(errs, field.Forbidden(path.Child("healthCheck", "enabled"),
				fmt.Sprintf("machineDeployments class %q of ClusterClass %s defines no healthCheck: give the topology its own checks or add them to the class", md.Class, classKey)))
		}
	}
	mpClasses := map[string]bool{}
	var mpNames []string
	for _, c := range cc.Spec.Workers.MachinePools {
		mpClasses[c.Class] = true
		mpNames = append(mpNames, strconv.Quote(c.Class))
	}
	for _, mp := range t.Workers.MachinePools {
		if !mpClasses[mp.Class] {
			errs = append(errs, field.Invalid(topologyPath.Child("workers", "machinePools").Key(mp.Name).Child("class"), mp.Class,
				fmt.Sprintf("ClusterClass %s has no machinePools class of this name: use one of [%s] or add it to the class", classKey, strings.Join(mpNames, ", "))))
		}
	}
	cp := &t.ControlPlane.HealthCheck
	if ptrTrue(cp.Enabled) && !cp.IsDefined() && isZero(cc.Spec.ControlPlane.HealthCheck) {
		errs = append(errs, field.Forbidden(topologyPath.Child("controlPlane", "healthCheck", "enabled"),
			fmt.Sprintf("ClusterClass %s defines no control plane healthCheck: give the topology its own checks or add them to the class", classKey)))
	}
	return errs
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func ptrTrue(b *bool) bool { return b != nil && *b }

func isZero(v any) bool { return reflect.ValueOf(v).IsZero() }
