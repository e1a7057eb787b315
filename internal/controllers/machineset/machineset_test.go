package machineset_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/contract"
	"capstan.dev/capstan/internal/controllers/machineset"
	fx "capstan.dev/capstan/test/fixture"
	"capstan.dev/capstan/test/provider"
)

func eventCount(t *testing.T, ns, reason string) int {
	t.Helper()
	list := &eventsv1.EventList{}
	if err := env.Client.List(context.Background(), list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range list.Items {
		if e.Reason == reason {
			n++
		}
	}
	return n
}

func controlledBy(obj metav1.Object, kind, name string) bool {
	ref := metav1.GetControllerOfNoCopy(obj)
	return ref != nil && ref.Kind == kind && ref.Name == name
}

func TestScaleUpClonesTemplates(t *testing.T) {
	f := newFixture(t, false)
	ms := f.machineSet("workers", 3)
	fx.Create(t, env.Client, ms)
	got := waitMachines(t, f.ns, 3)

	// The set is defaulted and owned as Cluster API does it.
	waitSet(t, ms, "the set's own write", func(ms *clusterv1.MachineSet) string {
		if len(ms.Finalizers) == 0 {
			return "no finalizer yet"
		}
		return ""
	})
	get(t, ms)
	if !hasString(ms.Finalizers, clusterv1.MachineSetFinalizer) || ms.Labels[clusterv1.ClusterNameLabel] != "c" {
		t.Errorf("finalizers %v, labels %v", ms.Finalizers, ms.Labels)
	}
	if refs := ms.OwnerReferences; len(refs) != 1 || refs[0].Kind != "Cluster" || refs[0].Name != "c" || ptr.Deref(refs[0].Controller, false) {
		t.Errorf("a standalone MachineSet should be owned (not controlled) by its Cluster: %+v", refs)
	}
	wantSelector := map[string]string{clusterv1.MachineSetNameLabel: "workers", clusterv1.ClusterNameLabel: "c"}
	if !reflect.DeepEqual(ms.Spec.Selector.MatchLabels, wantSelector) {
		t.Errorf("selector %v, want %v", ms.Spec.Selector.MatchLabels, wantSelector)
	}
	for k, v := range wantSelector {
		if ms.Spec.Template.Labels[k] != v {
			t.Errorf("template labels %v lack %s=%s", ms.Spec.Template.Labels, k, v)
		}
	}

	for _, m := range got {
		for k, v := range map[string]string{"pool": "a", clusterv1.MachineSetNameLabel: "workers", clusterv1.ClusterNameLabel: "c"} {
			if m.Labels[k] != v {
				t.Errorf("Machine %s labels %v lack %s=%s", m.Name, m.Labels, k, v)
			}
		}
		if m.Annotations["note"] != "x" {
			t.Errorf("Machine %s annotations %v", m.Name, m.Annotations)
		}
		if !controlledBy(m, "MachineSet", "workers") || !hasString(m.Finalizers, clusterv1.MachineFinalizer) {
			t.Errorf("Machine %s owners %+v, finalizers %v", m.Name, m.OwnerReferences, m.Finalizers)
		}
		if !strings.HasPrefix(m.Name, "workers-") || m.Spec.Version != "v1.33.0" || m.Spec.ClusterName != "c" {
			t.Errorf("Machine %s spec %+v", m.Name, m.Spec)
		}
		if want := provider.InfraMachine.Ref(m.Name); m.Spec.InfrastructureRef != want {
			t.Errorf("Machine %s infrastructureRef %+v, want %+v", m.Name, m.Spec.InfrastructureRef, want)
		}
		if want := provider.BootstrapConfig.Ref(m.Name); m.Spec.Bootstrap.ConfigRef != want {
			t.Errorf("Machine %s bootstrap.configRef %+v, want %+v", m.Name, m.Spec.Bootstrap.ConfigRef, want)
		}

		infra := provider.InfraMachine.New(f.ns, m.Name, nil)
		get(t, infra)
		if spec := infra.Object["spec"]; !reflect.DeepEqual(spec, map[string]any{"size": "large", "disks": []any{"a", "b"}}) {
			t.Errorf("TestMachine %s spec %v", m.Name, spec)
		}
		for k, v := range map[string]string{"from-infra-template": "yes", "pool": "a", clusterv1.MachineSetNameLabel: "workers", clusterv1.ClusterNameLabel: "c"} {
			if infra.GetLabels()[k] != v {
				t.Errorf("TestMachine %s labels %v lack %s=%s", m.Name, infra.GetLabels(), k, v)
			}
		}
		for k, v := range map[string]string{
			"infra-note": "n", "note": "x",
			clusterv1.TemplateClonedFromNameAnnotation:      "infra",
			clusterv1.TemplateClonedFromGroupKindAnnotation: "TestMachineTemplate." + provider.InfrastructureGroup,
		} {
			if infra.GetAnnotations()[k] != v {
				t.Errorf("TestMachine %s annotations %v lack %s=%s", m.Name, infra.GetAnnotations(), k, v)
			}
		}
		ownedByMachineAtCreation(t, infra, m)

		boot := provider.BootstrapConfig.New(f.ns, m.Name, nil)
		get(t, boot)
		if spec := boot.Object["spec"]; !reflect.DeepEqual(spec, map[string]any{"format": "cloud-config"}) {
			t.Errorf("TestBootstrapConfig %s spec %v", m.Name, spec)
		}
		if a := boot.GetAnnotations(); a[clusterv1.TemplateClonedFromNameAnnotation] != "boot" ||
			a[clusterv1.TemplateClonedFromGroupKindAnnotation] != "TestBootstrapConfigTemplate."+provider.BootstrapGroup {
			t.Errorf("TestBootstrapConfig %s annotations %v", m.Name, a)
		}
		if boot.GetLabels()[clusterv1.ClusterNameLabel] != "c" {
			t.Errorf("TestBootstrapConfig %s labels %v", m.Name, boot.GetLabels())
		}
		ownedByMachineAtCreation(t, boot, m)
	}

	// A standalone set's Machines are up to date.
	fx.Eventually(t, "Machines UpToDate", 30*time.Second, func(context.Context) string {
		for _, m := range machines(t, f.ns) {
			if c := meta.FindStatusCondition(m.Status.Conditions, clusterv1.UpToDateCondition); c == nil || c.Status != metav1.ConditionTrue {
				return fmt.Sprintf("Machine %s UpToDate %+v", m.Name, c)
			}
		}
		return ""
	})
	waitSet(t, ms, "status counts the Machines", func(ms *clusterv1.MachineSet) string {
		s := ms.Status
		if ptr.Deref(s.Replicas, -1) != 3 || ptr.Deref(s.UpToDateReplicas, -1) != 3 || ptr.Deref(s.ReadyReplicas, -1) != 0 {
			return "counters"
		}
		if want := []clusterv1.StatusVersion{{Version: "v1.33.0", Replicas: 3}}; !reflect.DeepEqual(s.Versions, want) {
			return fmt.Sprintf("versions %+v, want %+v", s.Versions, want)
		}
		if s.Selector != "cluster.x-k8s.io/cluster-name=c,cluster.x-k8s.io/set-name=workers" {
			return "selector " + s.Selector
		}
		if s.ObservedGeneration != ms.Generation {
			return "observedGeneration"
		}
		return conditionIs(clusterv1.ScalingUpCondition, metav1.ConditionFalse, clusterv1.NotScalingUpReason)(ms)
	})

	// The templates belong to the Cluster.
	for _, tmpl := range []*unstructured.Unstructured{f.infra, f.bootstrap} {
		get(t, tmpl)
		if refs := tmpl.GetOwnerReferences(); len(refs) != 1 || refs[0].Kind != "Cluster" || refs[0].UID != f.clusterUID(t) {
			t.Errorf("%s owners %+v, want the Cluster", tmpl.GetKind(), refs)
		}
	}
	fx.Eventually(t, "one event naming the Machines created", 30*time.Second, func(context.Context) string {
		list := &eventsv1.EventList{}
		if err := env.Client.List(context.Background(), list, client.InNamespace(f.ns)); err != nil {
			return err.Error()
		}
		var notes []string
		for _, e := range list.Items {
			if e.Reason == "SuccessfulCreate" {
				notes = append(notes, e.Note)
			}
		}
		if len(notes) != 1 {
			return fmt.Sprintf("SuccessfulCreate events %q, want one for the scale-up", notes)
		}
		for _, m := range got {
			if !strings.Contains(notes[0], m.Name) {
				return fmt.Sprintf("event %q does not name Machine %s", notes[0], m.Name)
			}
		}
		return ""
	})
}

// ownedByMachineAtCreation checks that obj's only owner is m, exactly as
// the Machine controller would set it (so it has nothing to patch), and that
// the reference came with the set's create rather than a later write.
func ownedByMachineAtCreation(t *testing.T, obj *unstructured.Unstructured, m *clusterv1.Machine) {
	t.Helper()
	if refs := obj.GetOwnerReferences(); len(refs) != 1 || !reflect.DeepEqual(refs[0], contract.MachineOwner(m)) {
		t.Errorf("%s %s owners %+v, want only %+v", obj.GetKind(), obj.GetName(), refs, contract.MachineOwner(m))
	}
	if writers := ownerReferenceWriters(obj); len(writers) != 1 || writers[0] != machineset.FieldManager {
		t.Errorf("%s %s owner references written by %v, want only by %s's create", obj.GetKind(), obj.GetName(), writers, machineset.FieldManager)
	}
}

// ownerReferenceWriters lists the field managers that wrote obj's owner
// references, from its managed fields.
func ownerReferenceWriters(obj metav1.Object) []string {
	var out []string
	for _, e := range obj.GetManagedFields() {
		if e.FieldsV1 != nil && strings.Contains(string(e.FieldsV1.Raw), `"f:ownerReferences"`) {
			out = append(out, e.Manager)
		}
	}
	return out
}

func (f *fixture) clusterUID(t *testing.T) types.UID {
	t.Helper()
	get(t, f.cluster)
	return f.cluster.UID
}

func TestReplicasDefaultToOne(t *testing.T) {
	f := newFixture(t, false)
	ms := f.machineSet("single", 0)
	ms.Spec.Replicas = nil
	fx.Create(t, env.Client, ms)
	waitMachines(t, f.ns, 1)
	waitSet(t, ms, "spec.replicas is written", func(ms *clusterv1.MachineSet) string {
		if ptr.Deref(ms.Spec.Replicas, -1) != 1 {
			return fmt.Sprintf("spec.replicas %v, want 1", ms.Spec.Replicas)
		}
		return ""
	})
}

func TestCountersAndConditions(t *testing.T) {
	f := newFixture(t, false)
	ms := f.machineSet("counted", 3)
	fx.Create(t, env.Client, ms)
	got := waitMachines(t, f.ns, 3)
	waitSet(t, ms, "Machines report nothing yet", conditionIs(clusterv1.MachinesReadyCondition, metav1.ConditionUnknown, clusterv1.ReadyUnknownReason))

	readyAndAvailable(t, got[0], got[1])
	setConditions(t, got[2], metav1.Condition{Type: clusterv1.ReadyCondition, Status: metav1.ConditionFalse, Reason: "NodeNotReady"})
	waitSet(t, ms, "two ready, one not", func(ms *clusterv1.MachineSet) string {
		s := ms.Status
		if ptr.Deref(s.ReadyReplicas, -1) != 2 || ptr.Deref(s.AvailableReplicas, -1) != 2 || ptr.Deref(s.Replicas, -1) != 3 {
			return "counters"
		}
		c := msCondition(ms, clusterv1.MachinesReadyCondition)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != clusterv1.NotReadyReason || c.Message != "Machine "+got[2].Name+" is not Ready" {
			return fmt.Sprintf("MachinesReady %+v", c)
		}
		return ""
	})

	readyAndAvailable(t, got[2])
	waitSet(t, ms, "all ready", func(ms *clusterv1.MachineSet) string {
		s := ms.Status
		if ptr.Deref(s.ReadyReplicas, -1) != 3 || ptr.Deref(s.AvailableReplicas, -1) != 3 || ptr.Deref(s.UpToDateReplicas, -1) != 3 {
			return "counters"
		}
		for _, c := range []struct {
			t      string
			status metav1.ConditionStatus
			reason string
		}{
			{clusterv1.MachinesReadyCondition, metav1.ConditionTrue, clusterv1.ReadyReason},
			{clusterv1.MachinesUpToDateCondition, metav1.ConditionTrue, clusterv1.UpToDateReason},
			{clusterv1.ScalingUpCondition, metav1.ConditionFalse, clusterv1.NotScalingUpReason},
			{clusterv1.ScalingDownCondition, metav1.ConditionFalse, clusterv1.NotScalingDownReason},
			{clusterv1.RemediatingCondition, metav1.ConditionFalse, clusterv1.NotRemediatingReason},
			{clusterv1.DeletingCondition, metav1.ConditionFalse, clusterv1.NotDeletingReason},
			{clusterv1.PausedCondition, metav1.ConditionFalse, clusterv1.NotPausedReason},
		} {
			if why := conditionIs(c.t, c.status, c.reason)(ms); why != "" {
				return why
			}
		}
		return ""
	})
}

func TestScaleDownPrefersAnnotatedAndUnhealthyMachines(t *testing.T) {
	f := newFixture(t, false)
	ms := f.machineSet("shrink", 4)
	fx.Create(t, env.Client, ms)
	got := waitMachines(t, f.ns, 4)
	readyAndAvailable(t, got...)
	update(t, got[3], func(m *clusterv1.Machine) {
		m.Annotations[clusterv1.DeleteMachineAnnotation] = ""
	})
	setConditions(t, got[1], cond(clusterv1.HealthCheckSucceededCondition, metav1.ConditionFalse))
	// Machine events arrive in order: once the status shows the health
	// check's verdict, the controller has seen the annotation too.
	waitSet(t, ms, "the unhealthy Machine is seen", func(ms *clusterv1.MachineSet) string {
		c := msCondition(ms, clusterv1.RemediatingCondition)
		if c == nil || !strings.Contains(c.Message, got[1].Name) || ptr.Deref(ms.Status.ReadyReplicas, 0) != 4 {
			return fmt.Sprintf("Remediating %+v", c)
		}
		return ""
	})

	update(t, ms, func(ms *clusterv1.MachineSet) { ms.Spec.Replicas = ptr.To(int32(2)) })
	want := []string{got[1].Name, got[3].Name}
	fx.Eventually(t, "the annotated and the unhealthy Machine are deleted", 30*time.Second, func(context.Context) string {
		all := machines(t, f.ns)
		if d := names(deleting(all)); !sameSet(d, want) || len(all) != 4 {
			return "Machines " + describe(all)
		}
		return ""
	})
	fx.Consistently(t, "nothing else is deleted or created", time.Second, func(context.Context) string {
		all := machines(t, f.ns)
		if d := names(deleting(all)); !sameSet(d, want) || len(all) != 4 {
			return "Machines " + describe(all)
		}
		return ""
	})
	waitSet(t, ms, "ScalingDown reports the work", conditionIs(clusterv1.ScalingDownCondition, metav1.ConditionTrue, clusterv1.ScalingDownReason))
	release(t, deleting(machines(t, f.ns))...)
	left := waitMachines(t, f.ns, 2)
	if !sameSet(names(left), []string{got[0].Name, got[2].Name}) {
		t.Errorf("left %v", names(left))
	}
	if n := eventCount(t, f.ns, "SuccessfulDelete"); n != 2 {
		t.Errorf("%d SuccessfulDelete events, want 2", n)
	}
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !hasString(b, x) {
			return false
		}
	}
	return true
}

func TestScaleDownOldestFirst(t *testing.T) {
	f := newFixture(t, false)
	ms := f.machineSet("aged", 1)
	ms.Spec.Deletion.Order = clusterv1.OldestMachineSetDeletionOrder
	fx.Create(t, env.Client, ms)
	waitMachines(t, f.ns, 1)
	// Creation timestamps have a resolution of one second.
	for _, n := range []int32{2, 3} {
		time.Sleep(1100 * time.Millisecond)
		update(t, ms, func(ms *clusterv1.MachineSet) { ms.Spec.Replicas = ptr.To(n) })
		waitMachines(t, f.ns, int(n))
	}
	all := waitMachines(t, f.ns, 3)
	readyAndAvailable(t, all...)
	waitSet(t, ms, "all ready", func(ms *clusterv1.MachineSet) string {
		if ptr.Deref(ms.Status.AvailableReplicas, 0) != 3 {
			return "not all available"
		}
		return ""
	})
	update(t, ms, func(ms *clusterv1.MachineSet) { ms.Spec.Replicas = ptr.To(int32(1)) })
	fx.Eventually(t, "the two oldest are deleted", 30*time.Second, func(context.Context) string {
		now := machines(t, f.ns)
		if d := names(deleting(now)); !sameSet(d, []string{all[0].Name, all[1].Name}) {
			return "Machines " + describe(now)
		}
		return ""
	})
}

func TestAdoptsOrphans(t *testing.T) {
	f := newFixture(t, false)
	orphan := func(name, cluster string, labels map[string]string) *clusterv1.Machine {
		return &clusterv1.Machine{
			ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name, Labels: labels},
			Spec: clusterv1.MachineSpec{
				ClusterName:       cluster,
				Bootstrap:         clusterv1.Bootstrap{DataSecretName: ptr.To("data")},
				InfrastructureRef: provider.InfraMachine.Ref(name),
			},
		}
	}
	matching := map[string]string{clusterv1.MachineSetNameLabel: "adopter", clusterv1.ClusterNameLabel: "c", "user": "label"}
	mine := orphan("orphan", "c", matching)
	foreign := orphan("foreign", "other", matching)
	fx.Create(t, env.Client, mine, foreign)

	ms := f.machineSet("adopter", 2)
	fx.Create(t, env.Client, ms)
	fx.Eventually(t, "the orphan is adopted and one Machine is added", 30*time.Second, func(context.Context) string {
		var controlled []string
		for _, m := range machines(t, f.ns) {
			if controlledBy(m, "MachineSet", "adopter") {
				controlled = append(controlled, m.Name)
			}
		}
		if len(controlled) != 2 || !hasString(controlled, "orphan") {
			return fmt.Sprintf("controlled %v", controlled)
		}
		return ""
	})
	get(t, mine)
	if mine.Labels["pool"] != "a" || mine.Labels["user"] != "label" {
		t.Errorf("adopted Machine labels %v: want the template's added and its own kept", mine.Labels)
	}
	get(t, foreign)
	if len(foreign.OwnerReferences) != 0 {
		t.Errorf("a Machine of another cluster was adopted: %+v", foreign.OwnerReferences)
	}
	fx.Eventually(t, "an adoption event", 30*time.Second, func(context.Context) string {
		if eventCount(t, f.ns, "SuccessfulAdopt") != 1 {
			return "no SuccessfulAdopt event"
		}
		return ""
	})
}

func TestInPlacePropagation(t *testing.T) {
	f := newFixture(t, false)
	ms := f.machineSet("inplace", 2)
	fx.Create(t, env.Client, ms)
	before := waitMachines(t, f.ns, 2)
	update(t, before[0], func(m *clusterv1.Machine) { m.Labels["user"] = "keep" })

	gates := []clusterv1.MachineReadinessGate{{ConditionType: "example.com/Ready"}}
	taints := []clusterv1.MachineTaint{{Key: "dedicated", Value: "gpu", Effect: "NoSchedule", Propagation: clusterv1.MachineTaintPropagationAlways}}
	update(t, ms, func(ms *clusterv1.MachineSet) {
		ms.Spec.Template.Labels["tier"] = "gold"
		ms.Spec.Template.Annotations["team"] = "infra"
		ms.Spec.Template.Spec.Deletion.NodeDrainTimeoutSeconds = ptr.To(int32(120))
		ms.Spec.Template.Spec.MinReadySeconds = ptr.To(int32(30))
		ms.Spec.Template.Spec.ReadinessGates = gates
		ms.Spec.Template.Spec.Taints = taints
	})
	fx.Eventually(t, "the changes reach the existing Machines", 30*time.Second, func(context.Context) string {
		for _, m := range machines(t, f.ns) {
			if m.Labels["tier"] != "gold" || m.Annotations["team"] != "infra" ||
				ptr.Deref(m.Spec.Deletion.NodeDrainTimeoutSeconds, 0) != 120 || ptr.Deref(m.Spec.MinReadySeconds, 0) != 30 ||
				!reflect.DeepEqual(m.Spec.ReadinessGates, gates) || !reflect.DeepEqual(m.Spec.Taints, taints) {
				return fmt.Sprintf("Machine %s: labels %v annotations %v spec %+v", m.Name, m.Labels, m.Annotations, m.Spec)
			}
		}
		return ""
	})

	update(t, ms, func(ms *clusterv1.MachineSet) {
		delete(ms.Spec.Template.Labels, "tier")
		delete(ms.Spec.Template.Annotations, "team")
		ms.Spec.Template.Spec.ReadinessGates = nil
	})
	fx.Eventually(t, "what the template dropped leaves the Machines; what others set stays", 30*time.Second, func(context.Context) string {
		for _, m := range machines(t, f.ns) {
			if _, ok := m.Labels["tier"]; ok {
				return fmt.Sprintf("Machine %s labels %v", m.Name, m.Labels)
			}
			if _, ok := m.Annotations["team"]; ok || len(m.Spec.ReadinessGates) != 0 {
				return fmt.Sprintf("Machine %s annotations %v gates %v", m.Name, m.Annotations, m.Spec.ReadinessGates)
			}
			if m.Labels["pool"] != "a" || m.Annotations["note"] != "x" {
				return fmt.Sprintf("Machine %s lost template metadata: %v %v", m.Name, m.Labels, m.Annotations)
			}
		}
		return ""
	})
	after := machines(t, f.ns)
	if len(after) != 2 || after[0].UID != before[0].UID || after[1].UID != before[1].UID {
		t.Fatalf("Machines were replaced: before %v, after %v", names(before), names(after))
	}
	if after[0].Labels["user"] != "keep" {
		t.Errorf("a label someone else set was removed: %v", after[0].Labels)
	}

	// Nothing changes, nothing is written.
	versions := map[string]string{}
	for _, m := range after {
		versions[m.Name] = m.ResourceVersion
	}
	update(t, ms, func(ms *clusterv1.MachineSet) { ms.Annotations = map[string]string{"poke": "1"} })
	fx.Consistently(t, "unchanged Machines are not written", 1500*time.Millisecond, func(context.Context) string {
		for _, m := range machines(t, f.ns) {
			if versions[m.Name] != m.ResourceVersion {
				return fmt.Sprintf("Machine %s was written: %+v", m.Name, m.ObjectMeta)
			}
		}
		return ""
	})
}

func TestRemediationReplacesMachine(t *testing.T) {
	f := newFixture(t, false)
	ms := f.machineSet("heal", 2)
	fx.Create(t, env.Client, ms)
	got := waitMachines(t, f.ns, 2)
	readyAndAvailable(t, got...)
	setConditions(t, got[0],
		cond(clusterv1.HealthCheckSucceededCondition, metav1.ConditionFalse),
		metav1.Condition{Type: clusterv1.OwnerRemediatedCondition, Status: metav1.ConditionFalse, Reason: "WaitingForRemediation"})
	fx.Eventually(t, "the unhealthy Machine is deleted", 30*time.Second, func(context.Context) string {
		all := machines(t, f.ns)
		if d := names(deleting(all)); !sameSet(d, []string{got[0].Name}) {
			return "Machines " + describe(all)
		}
		return ""
	})
	waitSet(t, ms, "Remediating", conditionIs(clusterv1.RemediatingCondition, metav1.ConditionTrue, clusterv1.RemediatingReason))
	fx.Consistently(t, "no replacement while it is still going", time.Second, func(context.Context) string {
		if all := machines(t, f.ns); len(all) != 2 {
			return "Machines " + describe(all)
		}
		return ""
	})
	release(t, got[0])
	now := waitMachines(t, f.ns, 2)
	if hasString(names(now), got[0].Name) || !hasString(names(now), got[1].Name) {
		t.Errorf("Machines after remediation %v", names(now))
	}
}

func TestDeploymentLimitsRemediationAndDecidesUpToDate(t *testing.T) {
	f := newFixture(t, false)
	ms := f.machineSet("md-1", 3)
	md := &clusterv1.MachineDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "md", Annotations: map[string]string{clusterv1.RevisionAnnotation: "2"}},
		Spec: clusterv1.MachineDeploymentSpec{
			ClusterName: "c",
			Replicas:    ptr.To(int32(3)),
			Selector:    metav1.LabelSelector{MatchLabels: map[string]string{"pool": "a"}},
			Template:    *ms.Spec.Template.DeepCopy(),
			Remediation: clusterv1.MachineDeploymentRemediationSpec{MaxInFlight: ptr.To(intstr.FromInt32(1))},
		},
	}
	fx.Create(t, env.Client, md)
	ms.Labels = map[string]string{clusterv1.MachineDeploymentNameLabel: "md"}
	ms.Annotations = map[string]string{clusterv1.RevisionAnnotation: "2"}
	ms.OwnerReferences = []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "MachineDeployment", Name: "md", UID: md.UID, Controller: ptr.To(true)}}
	fx.Create(t, env.Client, ms)
	got := waitMachines(t, f.ns, 3)
	for _, m := range got {
		if m.Labels[clusterv1.MachineDeploymentNameLabel] != "md" {
			t.Errorf("Machine %s labels %v lack the deployment's name", m.Name, m.Labels)
		}
	}
	get(t, ms)
	if len(ms.OwnerReferences) != 1 {
		t.Errorf("a MachineDeployment's set got another owner: %+v", ms.OwnerReferences)
	}
	upToDate := func(want metav1.ConditionStatus, message string) func(context.Context) string {
		return func(context.Context) string {
			for _, m := range live(machines(t, f.ns)) {
				c := meta.FindStatusCondition(m.Status.Conditions, clusterv1.UpToDateCondition)
				if c == nil || c.Status != want || !strings.Contains(c.Message, message) {
					return fmt.Sprintf("Machine %s UpToDate %+v", m.Name, c)
				}
			}
			return ""
		}
	}
	fx.Eventually(t, "Machines match the deployment", 30*time.Second, upToDate(metav1.ConditionTrue, ""))
	readyAndAvailable(t, got...)

	// Two Machines to remediate, one at a time.
	for _, m := range got[:2] {
		setConditions(t, m, cond(clusterv1.HealthCheckSucceededCondition, metav1.ConditionFalse),
			metav1.Condition{Type: clusterv1.OwnerRemediatedCondition, Status: metav1.ConditionFalse, Reason: "WaitingForRemediation"})
	}
	var waiting *clusterv1.Machine
	fx.Eventually(t, "one remediated, one deferred", 30*time.Second, func(context.Context) string {
		all := machines(t, f.ns)
		if d := deleting(all); len(d) != 1 {
			return "Machines " + describe(all)
		}
		for _, m := range live(all) {
			if c := meta.FindStatusCondition(m.Status.Conditions, clusterv1.OwnerRemediatedCondition); c != nil {
				if c.Reason != machineset.RemediationDeferredReason || !strings.Contains(c.Message, "maxInFlight is 1") {
					return fmt.Sprintf("Machine %s OwnerRemediated %+v", m.Name, c)
				}
				waiting = m
			}
		}
		if waiting == nil {
			return "no Machine waits"
		}
		return ""
	})
	fx.Consistently(t, "the limit holds", time.Second, func(context.Context) string {
		if d := deleting(machines(t, f.ns)); len(d) != 1 {
			return "Machines deleting: " + describe(d)
		}
		return ""
	})

	// A new template in the deployment makes the Machines out of date.
	update(t, md, func(md *clusterv1.MachineDeployment) { md.Spec.Template.Spec.Version = "v1.34.0" })
	fx.Eventually(t, "Machines are out of date", 30*time.Second, upToDate(metav1.ConditionFalse, "Version v1.33.0, v1.34.0 required"))
	waitSet(t, ms, "MachinesUpToDate", conditionIs(clusterv1.MachinesUpToDateCondition, metav1.ConditionFalse, clusterv1.NotUpToDateReason))

	// An old revision does not remediate.
	update(t, md, func(md *clusterv1.MachineDeployment) { md.Annotations[clusterv1.RevisionAnnotation] = "3" })
	fx.Eventually(t, "the waiting Machine cannot be remediated", 30*time.Second, func(context.Context) string {
		get(t, waiting)
		c := meta.FindStatusCondition(waiting.Status.Conditions, clusterv1.OwnerRemediatedCondition)
		if c == nil || c.Reason != machineset.CannotBeRemediatedReason {
			return fmt.Sprintf("OwnerRemediated %+v", c)
		}
		return ""
	})
}

func TestDeletionRemovesMachinesFirst(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, false)
	ms := f.machineSet("doomed", 2)
	fx.Create(t, env.Client, ms)
	got := waitMachines(t, f.ns, 2)
	waitSet(t, ms, "finalizer", func(ms *clusterv1.MachineSet) string {
		if !hasString(ms.Finalizers, clusterv1.MachineSetFinalizer) {
			return "no finalizer"
		}
		return ""
	})
	if err := env.Client.Delete(ctx, ms); err != nil {
		t.Fatal(err)
	}
	fx.Eventually(t, "Machines are deleted", 30*time.Second, func(context.Context) string {
		all := machines(t, f.ns)
		if len(deleting(all)) != 2 {
			return "Machines " + describe(all)
		}
		return ""
	})
	want := fmt.Sprintf("Waiting for Machines %s to be deleted", strings.Join(names(got), ", "))
	waitSet(t, ms, "Deleting says what it waits for", func(ms *clusterv1.MachineSet) string {
		c := msCondition(ms, clusterv1.DeletingCondition)
		if c == nil || c.Status != metav1.ConditionTrue || c.Message != want {
			return fmt.Sprintf("Deleting %+v", c)
		}
		return ""
	})
	release(t, got[0])
	time.Sleep(500 * time.Millisecond)
	get(t, ms)
	release(t, got[1])
	fx.Eventually(t, "the MachineSet goes once its Machines are gone", 30*time.Second, func(context.Context) string {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(ms), &clusterv1.MachineSet{})
		if !apierrors.IsNotFound(err) {
			return fmt.Sprintf("still there (%v)", err)
		}
		return ""
	})
}

func TestPauseStopsActions(t *testing.T) {
	f := newFixture(t, true)
	ms := f.machineSet("resting", 2)
	fx.Create(t, env.Client, ms)
	waitSet(t, ms, "paused by its Cluster", conditionIs(clusterv1.PausedCondition, metav1.ConditionTrue, clusterv1.PausedReason))
	fx.Consistently(t, "a paused set creates nothing", time.Second, func(context.Context) string {
		if all := machines(t, f.ns); len(all) != 0 {
			return "Machines " + describe(all)
		}
		get(t, ms)
		if len(ms.Finalizers) != 0 {
			return "a paused set got a finalizer"
		}
		return ""
	})

	update(t, f.cluster, func(c *clusterv1.Cluster) { c.Spec.Paused = ptr.To(false) })
	waitMachines(t, f.ns, 2)
	waitSet(t, ms, "unpaused", conditionIs(clusterv1.PausedCondition, metav1.ConditionFalse, clusterv1.NotPausedReason))

	// The annotation pauses one set.
	update(t, ms, func(ms *clusterv1.MachineSet) {
		ms.Annotations = map[string]string{clusterv1.PausedAnnotation: ""}
	})
	waitSet(t, ms, "paused by annotation", conditionIs(clusterv1.PausedCondition, metav1.ConditionTrue, clusterv1.PausedReason))
	update(t, ms, func(ms *clusterv1.MachineSet) { ms.Spec.Replicas = ptr.To(int32(3)) })
	fx.Consistently(t, "a paused set does not scale", time.Second, func(context.Context) string {
		if all := machines(t, f.ns); len(all) != 2 {
			return "Machines " + describe(all)
		}
		return ""
	})
	update(t, ms, func(ms *clusterv1.MachineSet) { delete(ms.Annotations, clusterv1.PausedAnnotation) })
	waitMachines(t, f.ns, 3)
}

// countClones counts the test provider's machines and bootstrap configs in
// the namespace.
func countClones(t *testing.T, ns string) (names []string) {
	t.Helper()
	for _, k := range []provider.Kind{provider.InfraMachine, provider.BootstrapConfig} {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(k.GVK().GroupVersion().WithKind(k.Kind + "List"))
		if err := env.Client.List(context.Background(), list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		for _, o := range list.Items {
			names = append(names, o.GetKind()+"/"+o.GetName())
		}
	}
	return names
}

func TestFailedMachineCreateLeavesNothingBehind(t *testing.T) {
	f := newFixture(t, false)
	// A Machine that takes the name the set will try.
	blocker := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "fixed"},
		Spec: clusterv1.MachineSpec{
			ClusterName:       "c",
			Bootstrap:         clusterv1.Bootstrap{DataSecretName: ptr.To("data")},
			InfrastructureRef: provider.InfraMachine.Ref("elsewhere"),
		},
	}
	fx.Create(t, env.Client, blocker)
	ms := f.machineSet("fails", 1)
	// Contains {{ .random }}, as the API demands, but never renders it.
	ms.Spec.MachineNaming.Template = "fixed{{ if false }}{{ .random }}{{ end }}"
	fx.Create(t, env.Client, ms)
	waitSet(t, ms, "ScalingUp says why nothing is created", func(ms *clusterv1.MachineSet) string {
		c := msCondition(ms, clusterv1.ScalingUpCondition)
		if c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "already exists") {
			return fmt.Sprintf("ScalingUp %+v", c)
		}
		return ""
	})
	// Pause the retries, then look.
	update(t, ms, func(ms *clusterv1.MachineSet) { ms.Annotations = map[string]string{clusterv1.PausedAnnotation: ""} })
	waitSet(t, ms, "paused", conditionIs(clusterv1.PausedCondition, metav1.ConditionTrue, ""))
	if left := countClones(t, f.ns); len(left) != 0 {
		t.Errorf("cloned objects left behind: %v", left)
	}
	if n := eventCount(t, f.ns, "FailedCreate"); n == 0 {
		t.Error("no FailedCreate event")
	}
	if all := machines(t, f.ns); len(all) != 1 {
		t.Errorf("Machines %v", names(all))
	}
}

func TestLeftoverClonesAreDeleted(t *testing.T) {
	f := newFixture(t, false)
	ms := f.machineSet("sweeper", 0)
	fx.Create(t, env.Client, ms)
	waitSet(t, ms, "reconciled", func(ms *clusterv1.MachineSet) string {
		if len(ms.Finalizers) == 0 {
			return "not yet"
		}
		return ""
	})
	get(t, ms)
	owned := func(name string) *unstructured.Unstructured {
		o := provider.InfraMachine.New(f.ns, name, map[string]any{"size": "large"})
		o.SetLabels(map[string]string{clusterv1.MachineSetNameLabel: "sweeper"})
		o.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "MachineSet", Name: ms.Name, UID: ms.UID, Controller: ptr.To(true)}})
		return o
	}
	// A manager stopped between cloning and creating the Machine leaves
	// this behind...
	leftover := owned("sweeper-left")
	// ...while this one has its Machine.
	kept := owned("sweeper-kept")
	machine := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "sweeper-kept"},
		Spec: clusterv1.MachineSpec{
			ClusterName:       "c",
			Bootstrap:         clusterv1.Bootstrap{DataSecretName: ptr.To("data")},
			InfrastructureRef: provider.InfraMachine.Ref("sweeper-kept"),
		},
	}
	fx.Create(t, env.Client, leftover, kept, machine)
	update(t, ms, func(ms *clusterv1.MachineSet) { ms.Annotations = map[string]string{"poke": "1"} })
	fx.Eventually(t, "the left-over clone is deleted", 30*time.Second, func(context.Context) string {
		err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(leftover), leftover.DeepCopy())
		if !apierrors.IsNotFound(err) {
			return fmt.Sprintf("still there (%v)", err)
		}
		return ""
	})
	get(t, kept)
}

func TestTemplateCreatedLaterWakesTheSet(t *testing.T) {
	f := newFixture(t, false)
	ms := f.machineSet("patient", 1)
	ms.Spec.Template.Spec.InfrastructureRef = provider.InfraMachineTemplate.Ref("late")
	fx.Create(t, env.Client, ms)
	waitSet(t, ms, "ScalingUp names the missing template", func(ms *clusterv1.MachineSet) string {
		c := msCondition(ms, clusterv1.ScalingUpCondition)
		if c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "TestMachineTemplate late does not exist") {
			return fmt.Sprintf("ScalingUp %+v", c)
		}
		return ""
	})
	fx.Create(t, env.Client, provider.InfraMachineTemplate.New(f.ns, "late", map[string]any{"template": map[string]any{"spec": map[string]any{}}}))
	got := waitMachines(t, f.ns, 1)
	// The Machine comes first, its clones right after.
	infra := provider.InfraMachine.New(f.ns, got[0].Name, nil)
	fx.Eventually(t, "the Machine's infrastructure clone", 30*time.Second, func(context.Context) string {
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(infra), infra); err != nil {
			return err.Error()
		}
		return ""
	})
	if infra.GetAnnotations()[clusterv1.TemplateClonedFromNameAnnotation] != "late" {
		t.Errorf("annotations %v", infra.GetAnnotations())
	}
}
