package plan_test

import (
	"strconv"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/plan"
)

// machineTemplate is a MachineDeployment's template at version, labelled
// pool=a, with an infrastructure reference.
func machineTemplate(version string) clusterv1.MachineTemplateSpec {
	var t clusterv1.MachineTemplateSpec
	t.Labels = map[string]string{"pool": "a"}
	t.Spec.Version = version
	t.Spec.InfrastructureRef = clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.example.com", Kind: "ExampleMachineTemplate", Name: "t1"}
	return t
}

func TestTemplateUpToDateIgnoresInPlaceFields(t *testing.T) {
	base := machineTemplate("v1.34.0")
	inPlace := base
	inPlace.Labels = map[string]string{"pool": "b", "extra": "x"}
	inPlace.Annotations = map[string]string{"note": "y"}
	inPlace.Spec.MinReadySeconds = ptr.To(int32(30))
	inPlace.Spec.ReadinessGates = []clusterv1.MachineReadinessGate{{ConditionType: "X"}}
	inPlace.Spec.Deletion.NodeDrainTimeoutSeconds = ptr.To(int32(60))
	inPlace.Spec.Deletion.NodeVolumeDetachTimeoutSeconds = ptr.To(int32(60))
	inPlace.Spec.Deletion.NodeDeletionTimeoutSeconds = ptr.To(int32(60))
	inPlace.Spec.Taints = []clusterv1.MachineTaint{{Key: "k", Effect: "NoSchedule", Propagation: clusterv1.MachineTaintPropagationAlways}}
	if !plan.TemplateUpToDate(&base, &inPlace) {
		t.Error("fields propagated in place must not need new Machines")
	}
	if got := plan.TemplateChanges(&base, &inPlace); got != nil {
		t.Errorf("fields propagated in place are described as %q", got)
	}

	for name, change := range map[string]func(*clusterv1.MachineTemplateSpec){
		"version":        func(t *clusterv1.MachineTemplateSpec) { t.Spec.Version = "v1.35.0" },
		"infrastructure": func(t *clusterv1.MachineTemplateSpec) { t.Spec.InfrastructureRef.Name = "t2" },
		"bootstrap": func(t *clusterv1.MachineTemplateSpec) {
			t.Spec.Bootstrap.ConfigRef = clusterv1.ContractVersionedObjectReference{APIGroup: "b", Kind: "C", Name: "n"}
		},
		"failure domain": func(t *clusterv1.MachineTemplateSpec) { t.Spec.FailureDomain = "fd-b" },
	} {
		changed := *base.DeepCopy()
		change(&changed)
		if plan.TemplateUpToDate(&base, &changed) {
			t.Errorf("a %s change must need new Machines", name)
		}
		if got := plan.TemplateChanges(&base, &changed); len(got) != 1 {
			t.Errorf("a %s change is described as %q", name, got)
		}
	}
	v2 := machineTemplate("v1.35.0")
	if got := plan.TemplateChanges(&base, &v2); len(got) != 1 || got[0] != "version v1.34.0 → v1.35.0" {
		t.Errorf("version change described as %q", got)
	}
}

func revisioned(name string, rev string) *clusterv1.MachineSet {
	ms := &clusterv1.MachineSet{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if rev != "" {
		ms.Annotations = map[string]string{clusterv1.RevisionAnnotation: rev}
	}
	return ms
}

func TestRevisions(t *testing.T) {
	one, two, three := revisioned("one", "1"), revisioned("two", "2"), revisioned("three", "3")
	unnumbered, broken := revisioned("unnumbered", ""), revisioned("broken", "-4")
	for _, tc := range []struct {
		name       string
		sets       []*clusterv1.MachineSet
		current    *clusterv1.MachineSet
		next, bump int64
	}{
		{"no sets", nil, nil, 1, 0},
		{"no up-to-date set", []*clusterv1.MachineSet{one, two}, nil, 3, 0},
		{"the up-to-date set is the newest", []*clusterv1.MachineSet{one, two, three}, three, 4, 0},
		{"an old set comes back", []*clusterv1.MachineSet{one, two, three}, one, 4, 4},
		{"the up-to-date set has no revision", []*clusterv1.MachineSet{unnumbered}, unnumbered, 1, 1},
		{"a negative revision counts as none", []*clusterv1.MachineSet{one, broken}, broken, 2, 2},
	} {
		next, bump := plan.Revisions(tc.sets, tc.current)
		if next != tc.next || bump != tc.bump {
			t.Errorf("%s: next %d, bump %d; want %d, %d", tc.name, next, bump, tc.next, tc.bump)
		}
	}
}

func TestRollbackTemplate(t *testing.T) {
	md := &clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Name: "md", UID: types.UID("u1"),
		Annotations: map[string]string{clusterv1.RevisionAnnotation: "3"}}}
	md.Spec.Template = machineTemplate("v1.36.0")
	set := func(name, version string, rev int, owner types.UID) clusterv1.MachineSet {
		ms := clusterv1.MachineSet{ObjectMeta: metav1.ObjectMeta{Name: name,
			Annotations:     map[string]string{clusterv1.RevisionAnnotation: strconv.Itoa(rev)},
			OwnerReferences: []metav1.OwnerReference{{Kind: clusterv1.MachineDeploymentKind, Name: "md", UID: owner, Controller: ptr.To(true)}},
		}}
		ms.Spec.Template = machineTemplate(version)
		ms.Spec.Template.Labels[clusterv1.MachineDeploymentUniqueLabel] = name
		return ms
	}
	sets := []clusterv1.MachineSet{
		set("one", "v1.34.0", 1, "u1"),
		set("two", "v1.35.0", 2, "u1"),
		set("three", "v1.36.0", 3, "u1"),
		set("other", "v1.30.0", 2, "someone-else"),
	}
	got, err := plan.RollbackTemplate(md, sets, 0)
	if err != nil || got.Spec.Version != "v1.35.0" || got.Labels[clusterv1.MachineDeploymentUniqueLabel] != "" || got.Labels["pool"] != "a" {
		t.Errorf("previous revision: %+v, %v", got, err)
	}
	if got, err := plan.RollbackTemplate(md, sets, 1); err != nil || got.Spec.Version != "v1.34.0" {
		t.Errorf("revision 1: %+v, %v", got, err)
	}
	if _, err := plan.RollbackTemplate(md, sets, 3); err == nil || !strings.Contains(err.Error(), "already runs revision 3") {
		t.Errorf("rolling back to the current revision: %v", err)
	}
	if _, err := plan.RollbackTemplate(md, sets, 5); err == nil || !strings.Contains(err.Error(), "kept revisions: 1, 2, 3") {
		t.Errorf("rolling back to a revision that is gone: %v", err)
	}
	if _, err := plan.RollbackTemplate(md, sets[2:3], 0); err == nil || !strings.Contains(err.Error(), "no revision before 3") {
		t.Errorf("rolling back without history: %v", err)
	}
}
