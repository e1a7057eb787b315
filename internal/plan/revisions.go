package plan

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

// DefaultRevisionHistoryLimit is how many old MachineSets that are scaled to
// zero and hold no Machines a MachineDeployment keeps for rollbacks when no
// limit is configured. The v1beta2 API has no per-MachineDeployment field
// for it.
const DefaultRevisionHistoryLimit = 1

// TemplateUpToDate tells whether a MachineSet's template needs no new
// Machines to match a MachineDeployment's: the two are equal but for the
// fields that are propagated in place (labels, annotations, minReadySeconds,
// readiness gates, deletion timeouts and taints).
func TemplateUpToDate(set, deployment *clusterv1.MachineTemplateSpec) bool {
	return apiequality.Semantic.DeepEqual(RolloutTemplate(set), RolloutTemplate(deployment))
}

// RolloutTemplate is the part of a template whose change replaces Machines:
// a copy with the in-place fields cleared.
func RolloutTemplate(t *clusterv1.MachineTemplateSpec) clusterv1.MachineTemplateSpec {
	out := *t.DeepCopy()
	out.ObjectMeta = clusterv1.ObjectMeta{}
	out.Spec.MinReadySeconds = nil
	out.Spec.ReadinessGates = nil
	out.Spec.Deletion = clusterv1.MachineDeletionSpec{}
	out.Spec.Taints = nil
	return out
}

// TemplateChanges says, briefly, how an old template differs from the new
// one in what causes a rollout; nil when nothing does.
func TemplateChanges(oldT, newT *clusterv1.MachineTemplateSpec) []string {
	o, n := RolloutTemplate(oldT), RolloutTemplate(newT)
	var out []string
	if o.Spec.Version != n.Spec.Version {
		out = append(out, fmt.Sprintf("version %s → %s", orNone(o.Spec.Version), orNone(n.Spec.Version)))
	}
	if o.Spec.InfrastructureRef != n.Spec.InfrastructureRef {
		out = append(out, fmt.Sprintf("infrastructureRef %s → %s", refString(o.Spec.InfrastructureRef), refString(n.Spec.InfrastructureRef)))
	}
	if o.Spec.Bootstrap.ConfigRef != n.Spec.Bootstrap.ConfigRef {
		out = append(out, fmt.Sprintf("bootstrap.configRef %s → %s", refString(o.Spec.Bootstrap.ConfigRef), refString(n.Spec.Bootstrap.ConfigRef)))
	}
	if ptr.Deref(o.Spec.Bootstrap.DataSecretName, "") != ptr.Deref(n.Spec.Bootstrap.DataSecretName, "") {
		out = append(out, "bootstrap.dataSecretName changed")
	}
	if o.Spec.FailureDomain != n.Spec.FailureDomain {
		out = append(out, fmt.Sprintf("failureDomain %s → %s", orNone(o.Spec.FailureDomain), orNone(n.Spec.FailureDomain)))
	}
	if len(out) == 0 && !apiequality.Semantic.DeepEqual(o, n) {
		out = append(out, "template changed")
	}
	return out
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func refString(r clusterv1.ContractVersionedObjectReference) string {
	if !r.IsDefined() {
		return "(none)"
	}
	return r.Kind + "/" + r.Name
}

// Revision reads an object's revision annotation; 0 when it has none or
// it is not a non-negative number.
func Revision(obj metav1.Object) int64 {
	n, err := strconv.ParseInt(obj.GetAnnotations()[clusterv1.RevisionAnnotation], 10, 64)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// Revisions numbers a MachineDeployment's revisions. The up-to-date set,
// current (nil when there is none), must hold the highest revision: when its
// own is not above every other set's, or it has none (it came back, as in a
// rollback), bump is the number it is given next, otherwise 0. next is the
// revision of a set created now.
func Revisions(sets []*clusterv1.MachineSet, current *clusterv1.MachineSet) (next, bump int64) {
	var maxRevision, maxOthers int64
	for _, ms := range sets {
		rev := Revision(ms)
		maxRevision = max(maxRevision, rev)
		if ms != current {
			maxOthers = max(maxOthers, rev)
		}
	}
	if current != nil && (Revision(current) <= maxOthers || Revision(current) == 0) {
		bump = maxOthers + 1
	}
	return maxRevision + 1, bump
}

// RollbackTemplate returns the Machine template of an earlier revision of
// md, to be written to md's spec.template; toRevision 0 means the revision
// before the current one. sets are MachineSets of md's namespace: those md
// does not control are ignored. Writing the template back makes the
// revision's MachineSet the up-to-date one again, and the controller rolls
// back to it like any other rollout.
func RollbackTemplate(md *clusterv1.MachineDeployment, sets []clusterv1.MachineSet, toRevision int64) (*clusterv1.MachineTemplateSpec, error) {
	var owned []*clusterv1.MachineSet
	for i := range sets {
		ref := metav1.GetControllerOf(&sets[i])
		if ref != nil && ref.UID == md.UID && ref.Kind == clusterv1.MachineDeploymentKind && Revision(&sets[i]) > 0 {
			owned = append(owned, &sets[i])
		}
	}
	current := Revision(md)
	for _, ms := range owned {
		if TemplateUpToDate(&ms.Spec.Template, &md.Spec.Template) {
			current = max(current, Revision(ms))
		}
	}
	var target *clusterv1.MachineSet
	for _, ms := range owned {
		rev := Revision(ms)
		switch {
		case toRevision > 0 && rev == toRevision:
			target = ms
		case toRevision == 0 && rev < current && (target == nil || rev > Revision(target)):
			target = ms
		}
	}
	if target == nil {
		var revisions []int64
		for _, ms := range owned {
			revisions = append(revisions, Revision(ms))
		}
		slices.Sort(revisions)
		var kept []string
		for _, rev := range revisions {
			kept = append(kept, strconv.FormatInt(rev, 10))
		}
		if toRevision == 0 {
			return nil, fmt.Errorf("MachineDeployment %s has no revision before %d to roll back to (kept revisions: %s)", md.Name, current, listOrNone(kept))
		}
		return nil, fmt.Errorf("revision %d of MachineDeployment %s is not kept (kept revisions: %s)", toRevision, md.Name, listOrNone(kept))
	}
	if Revision(target) == current && TemplateUpToDate(&target.Spec.Template, &md.Spec.Template) {
		return nil, fmt.Errorf("MachineDeployment %s already runs revision %d", md.Name, current)
	}
	t := target.Spec.Template.DeepCopy()
	delete(t.Labels, clusterv1.MachineDeploymentUniqueLabel)
	if len(t.Labels) == 0 {
		t.Labels = nil
	}
	return t, nil
}

func listOrNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}
