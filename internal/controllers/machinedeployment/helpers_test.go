package machinedeployment

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/plan"
)

func template(version string) clusterv1.MachineTemplateSpec {
	return clusterv1.MachineTemplateSpec{
		ObjectMeta: clusterv1.ObjectMeta{Labels: map[string]string{"pool": "a"}},
		Spec: clusterv1.MachineSpec{
			ClusterName: "c1",
			Version:     version,
			Bootstrap:   clusterv1.Bootstrap{DataSecretName: ptr.To("data")},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: "infrastructure.example.com", Kind: "ExampleMachineTemplate", Name: "t1",
			},
		},
	}
}

func TestTemplateHashIgnoresInPlaceFields(t *testing.T) {
	base := template("v1.34.0")
	hash := templateHash(&base, 0)
	inPlace := map[string]func(*clusterv1.MachineTemplateSpec){
		"labels":          func(t *clusterv1.MachineTemplateSpec) { t.Labels = map[string]string{"pool": "b"} },
		"annotations":     func(t *clusterv1.MachineTemplateSpec) { t.Annotations = map[string]string{"note": "y"} },
		"minReadySeconds": func(t *clusterv1.MachineTemplateSpec) { t.Spec.MinReadySeconds = ptr.To(int32(30)) },
		"drain timeout":   func(t *clusterv1.MachineTemplateSpec) { t.Spec.Deletion.NodeDrainTimeoutSeconds = ptr.To(int32(60)) },
	}
	replacing := map[string]func(*clusterv1.MachineTemplateSpec){
		"version":        func(t *clusterv1.MachineTemplateSpec) { t.Spec.Version = "v1.35.0" },
		"infrastructure": func(t *clusterv1.MachineTemplateSpec) { t.Spec.InfrastructureRef.Name = "t2" },
		"failure domain": func(t *clusterv1.MachineTemplateSpec) { t.Spec.FailureDomain = "fd-b" },
	}
	for want, changes := range map[bool]map[string]func(*clusterv1.MachineTemplateSpec){true: inPlace, false: replacing} {
		for name, change := range changes {
			changed := *base.DeepCopy()
			change(&changed)
			if same := templateHash(&changed, 0) == hash; same != want {
				t.Errorf("a %s change: same hash %v, want %v", name, same, want)
			}
		}
	}
}

func TestTemplateHashAndNames(t *testing.T) {
	tmpl := template("v1.34.0")
	h := templateHash(&tmpl, 0)
	if len(h) != 10 || strings.Trim(h, hashAlphabet) != "" {
		t.Errorf("hash %q is not 10 characters of %q", h, hashAlphabet)
	}
	if templateHash(&tmpl, 0) != h {
		t.Error("the hash is not stable")
	}
	if templateHash(&tmpl, 1) == h {
		t.Error("a salt must give another hash")
	}
	md := &clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Name: strings.Repeat("a", 52) + "-" + strings.Repeat("b", 10)}}
	name := setName(md, h)
	if len(name) > 63 || !strings.HasSuffix(name, "-"+h) || strings.Contains(name, "--") {
		t.Errorf("name %q", name)
	}
	if got := setName(&clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Name: "md"}}, h); got != "md-"+h {
		t.Errorf("name %q", got)
	}
}

func TestDefaults(t *testing.T) {
	for _, sel := range []metav1.LabelSelector{{}, {MatchLabels: map[string]string{}}} {
		md := &clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Name: "md"}}
		md.Spec.ClusterName = "c1"
		md.Spec.Selector = sel
		defaultSelector(md)
		for _, labels := range []map[string]string{md.Spec.Selector.MatchLabels, md.Spec.Template.Labels} {
			if labels[clusterv1.MachineDeploymentNameLabel] != "md" || labels[clusterv1.ClusterNameLabel] != "c1" {
				t.Errorf("selector %+v, template labels %v", md.Spec.Selector, md.Spec.Template.Labels)
			}
		}
	}
	custom := &clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Name: "md"}}
	custom.Spec.Selector.MatchLabels = map[string]string{"pool": "a"}
	defaultSelector(custom)
	if len(custom.Spec.Selector.MatchLabels) != 1 || custom.Spec.Template.Labels != nil {
		t.Errorf("a selector that is set was changed: %+v", custom.Spec.Selector)
	}
}

func TestSyncSetPropagatesInPlaceFieldsToTheUpToDateSetOnly(t *testing.T) {
	md := &clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Name: "md", Annotations: map[string]string{
		"team": "x", clusterv1.RevisionAnnotation: "7", "kubectl.kubernetes.io/last-applied-configuration": "{}",
	}}}
	md.Spec.ClusterName = "c1"
	md.Spec.Template = template("v1.34.0")
	md.Spec.Template.Labels = map[string]string{"pool": "a", "tier": "gold"}
	md.Spec.Template.Spec.MinReadySeconds = ptr.To(int32(5))
	md.Spec.Deletion.Order = clusterv1.NewestMachineSetDeletionOrder

	ms := newMachineSet(md, "md-h", "h", 1, 2, 1)
	ms.Spec.Template.Labels = map[string]string{"pool": "a", "gone": "yes", clusterv1.MachineDeploymentUniqueLabel: "h"}
	ms.Spec.Template.Spec.MinReadySeconds = nil
	ms.Spec.Deletion.Order = ""
	old := ms.DeepCopy()

	syncSet(md, old, false, false)
	if old.Spec.Template.Labels["gone"] != "yes" || old.Spec.Deletion.Order != "" {
		t.Error("an old set must keep what it had")
	}
	if old.Annotations[clusterv1.DisableMachineCreateAnnotation] != "true" {
		t.Errorf("an old set may still create Machines: %v", old.Annotations)
	}
	ms.Annotations[clusterv1.DisableMachineCreateAnnotation] = "true"
	syncSet(md, ms, true, true)
	if _, ok := ms.Annotations[clusterv1.DisableMachineCreateAnnotation]; ok {
		t.Error("the up-to-date set may not create Machines")
	}
	l := ms.Spec.Template.Labels
	if l["gone"] != "" || l["tier"] != "gold" || l[clusterv1.MachineDeploymentUniqueLabel] != "h" || l[clusterv1.MachineDeploymentNameLabel] != "md" {
		t.Errorf("template labels %v", l)
	}
	if ptr.Deref(ms.Spec.Template.Spec.MinReadySeconds, 0) != 5 || ms.Spec.Deletion.Order != clusterv1.NewestMachineSetDeletionOrder {
		t.Errorf("spec %+v", ms.Spec)
	}
	if ms.Annotations["team"] != "x" || ms.Annotations[clusterv1.RevisionAnnotation] != "1" || ms.Annotations["kubectl.kubernetes.io/last-applied-configuration"] != "" {
		t.Errorf("annotations %v", ms.Annotations)
	}
}

func TestPausedRolloutIsPlannedAsOnDelete(t *testing.T) {
	md := &clusterv1.MachineDeployment{}
	md.Spec.Replicas = ptr.To(int32(4))
	md.Spec.Paused = ptr.To(true)
	old := &clusterv1.MachineSet{ObjectMeta: metav1.ObjectMeta{Name: "old", CreationTimestamp: metav1.NewTime(time.Unix(100, 0))}}
	old.Spec.Replicas = ptr.To(int32(3))
	old.Status.Replicas, old.Status.AvailableReplicas = ptr.To(int32(3)), ptr.To(int32(3))
	s := &scope{md: md, sets: []*clusterv1.MachineSet{old}, scaled: old, machines: map[string][]*clusterv1.Machine{}}
	in := rolloutInput(s)
	if in.Strategy.Type != plan.OnDelete || !in.MachineSets[0].UpToDate {
		t.Fatalf("input %+v", in)
	}
	p, err := plan.PlanRollout(in)
	if err != nil {
		t.Fatal(err)
	}
	if p.Create != nil || p.MachineSets[0].To != 4 {
		t.Errorf("a paused rollout should scale the newest set to 4: %+v", p)
	}
}

func TestListMachines(t *testing.T) {
	if got := listMachines([]string{"b", "a"}, "not Ready"); got != "2 Machines are not Ready: a, b" {
		t.Errorf("%q", got)
	}
	if got := listMachines([]string{"e", "d", "c", "b", "a"}, "not Ready"); got != "5 Machines are not Ready: a, b, c and 2 more" {
		t.Errorf("%q", got)
	}
}

// A new set carries from birth what the MachineSet controller would add at
// once, so that controller has nothing to write: its finalizer, and the
// cluster name in a selector that its template's labels match.
func TestNewMachineSetIsBornComplete(t *testing.T) {
	md := &clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Name: "md"}}
	md.Spec.ClusterName = "c1"
	md.Spec.Template = template("v1.34.0")
	md.Spec.Selector = metav1.LabelSelector{MatchLabels: map[string]string{"pool": "a"}}
	ms := newMachineSet(md, "md-h", "h", 1, 2, 1)
	if len(ms.Finalizers) != 1 || ms.Finalizers[0] != clusterv1.MachineSetFinalizer {
		t.Errorf("finalizers %v, want [%s]", ms.Finalizers, clusterv1.MachineSetFinalizer)
	}
	if ms.Spec.Selector.MatchLabels[clusterv1.ClusterNameLabel] != "c1" {
		t.Errorf("selector %v lacks the cluster name", ms.Spec.Selector.MatchLabels)
	}
	for k, v := range ms.Spec.Selector.MatchLabels {
		if ms.Spec.Template.Labels[k] != v {
			t.Errorf("template labels %v do not match selector label %s=%s", ms.Spec.Template.Labels, k, v)
		}
	}
}

// After a move every MachineSet is re-created with new timestamps, so two
// sets can both be up to date; the one holding the Machines must stay the
// deployment's current set, or every Machine would be replaced.
func TestClassifyKeepsTheUpToDateSetWithMostReplicas(t *testing.T) {
	md := &clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Name: "md"}}
	md.Spec.ClusterName = "c1"
	md.Spec.Template = template("v1.34.0")
	md.Spec.Rollout.After = metav1.NewTime(time.Unix(50, 0))
	empty := newMachineSet(md, "md-a", "a", 0, 3, 1)
	empty.CreationTimestamp = metav1.NewTime(time.Unix(100, 0))
	holding := newMachineSet(md, "md-b", "b", 3, 3, 2)
	holding.CreationTimestamp = metav1.NewTime(time.Unix(100, 0))
	tied := newMachineSet(md, "md-c", "c", 3, 3, 3)
	tied.CreationTimestamp = metav1.NewTime(time.Unix(101, 0))

	r := &Reconciler{}
	s := &scope{md: md, now: time.Unix(200, 0), sets: []*clusterv1.MachineSet{empty, holding, tied}}
	r.classify(s)
	if s.current != holding || s.scaled != holding {
		t.Errorf("current %v, scaled %v; want md-b, the oldest set holding the most replicas", s.current.Name, s.scaled.Name)
	}
	if !s.upToDate["md-a"] || !s.upToDate["md-b"] || !s.upToDate["md-c"] {
		t.Errorf("every set made after rollout.after with the template is up to date: %v", s.upToDate)
	}
}
