package machineset

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

func fixedRandom(n int) string { return strings.Repeat("x", n) }

func TestMachineName(t *testing.T) {
	long := strings.Repeat("a", 70)
	tests := []struct {
		name, template, machineSet string
		want, wantErr              string
	}{
		{name: "default", machineSet: "ms", want: "ms-xxxxx"},
		{name: "template with the cluster's name", template: "{{ .cluster.name }}-w-{{ .random }}", machineSet: "ms", want: "c1-w-xxxxx"},
		{name: "long names are cut to 58 and get a random suffix", machineSet: long, want: long[:58] + "xxxxx"},
		{name: "random is required", template: "{{ .machineSet.name }}", machineSet: "ms", wantErr: "must contain {{ .random }}"},
		{name: "unknown keys are refused", template: "{{ .machineDeployment.name }}-{{ .random }}", machineSet: "ms", wantErr: "cannot be rendered"},
		{name: "broken templates are refused", template: "{{ .random }}{{", machineSet: "ms", wantErr: "cannot be parsed"},
		{name: "invalid names are refused", template: "Upper-{{ .random }}", machineSet: "ms", wantErr: "not a valid object name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := machineName(tt.template, "c1", tt.machineSet, fixedRandom)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one saying %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
	// Real random suffixes differ.
	a, _ := machineName("", "c", "ms", randomString)
	b, _ := machineName("", "c", "ms", randomString)
	if a == b || len(a) != len("ms-")+randomLength {
		t.Errorf("random names %q and %q", a, b)
	}
}

func TestOwnedKeys(t *testing.T) {
	entry := func(manager string, op metav1.ManagedFieldsOperationType, sub, fields string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: op, Subresource: sub, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(fields)}}
	}
	m := &clusterv1.Machine{}
	m.ManagedFields = []metav1.ManagedFieldsEntry{
		entry(FieldManager, metav1.ManagedFieldsOperationUpdate, "", `{"f:metadata":{"f:labels":{".":{},"f:a":{},"f:example.com/b":{}},"f:annotations":{"f:n":{}}}}`),
		entry("kubectl", metav1.ManagedFieldsOperationUpdate, "", `{"f:metadata":{"f:labels":{"f:c":{}}}}`),
		entry(FieldManager, metav1.ManagedFieldsOperationUpdate, "status", `{"f:metadata":{"f:labels":{"f:d":{}}}}`),
		entry(FieldManager, metav1.ManagedFieldsOperationApply, "", `{"f:metadata":{"f:labels":{"f:e":{}}}}`),
	}
	got := ownedKeys(m, FieldManager, "labels")
	if len(got) != 2 || !got["a"] || !got["example.com/b"] {
		t.Errorf("labels %v, want a and example.com/b", got)
	}
	if got := ownedKeys(m, FieldManager, "annotations"); len(got) != 1 || !got["n"] {
		t.Errorf("annotations %v, want n", got)
	}
}

func TestPropagate(t *testing.T) {
	current := map[string]string{"mine-kept": "old", "mine-dropped": "x", "theirs": "y"}
	desired := map[string]string{"mine-kept": "new", "added": "z"}
	owned := map[string]bool{"mine-kept": true, "mine-dropped": true}
	got := propagate(current, desired, owned)
	want := map[string]string{"mine-kept": "new", "added": "z", "theirs": "y"}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
	if current["mine-kept"] != "old" {
		t.Error("propagate changed its input")
	}
	if propagate(nil, nil, nil) != nil {
		t.Error("nothing should stay nothing")
	}
}

func machineTemplate(version, infra string) clusterv1.MachineTemplateSpec {
	return clusterv1.MachineTemplateSpec{
		ObjectMeta: clusterv1.ObjectMeta{Labels: map[string]string{"a": "b"}},
		Spec: clusterv1.MachineSpec{
			ClusterName:       "c",
			Version:           version,
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infra.example.com", Kind: "FooMachineTemplate", Name: infra},
			Bootstrap:         clusterv1.Bootstrap{ConfigRef: clusterv1.ContractVersionedObjectReference{APIGroup: "bootstrap.example.com", Kind: "BarConfigTemplate", Name: "b"}},
		},
	}
}

func TestTemplateDifferences(t *testing.T) {
	base := machineTemplate("v1.33.0", "t1")
	same := machineTemplate("v1.33.0", "t1")
	// Fields propagated in place never need new Machines.
	same.Labels = map[string]string{"other": "x"}
	same.Annotations = map[string]string{"n": "v"}
	same.Spec.ClusterName = "elsewhere"
	same.Spec.MinReadySeconds = ptr.To(int32(30))
	same.Spec.ReadinessGates = []clusterv1.MachineReadinessGate{{ConditionType: "Custom"}}
	same.Spec.Deletion.NodeDrainTimeoutSeconds = ptr.To(int32(60))
	same.Spec.Taints = []clusterv1.MachineTaint{{Key: "k", Effect: "NoSchedule", Propagation: clusterv1.MachineTaintPropagationAlways}}
	if d := templateDifferences(&base, &same); len(d) != 0 {
		t.Errorf("in-place fields counted as differences: %v", d)
	}

	changed := machineTemplate("v1.34.0", "t2")
	changed.Spec.FailureDomain = "fd-b"
	changed.Spec.Bootstrap.ConfigRef.Name = "b2"
	changed.Spec.ProviderID = "test://x"
	got := templateDifferences(&base, &changed)
	want := []string{
		"Version v1.33.0, v1.34.0 required",
		"BarConfig is not up-to-date",
		"FooMachine is not up-to-date",
		"Failure domain unset, fd-b required",
		"spec.providerID differs",
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("got\n%v\nwant\n%v", got, want)
	}
}

func TestUpToDate(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	ms := &clusterv1.MachineSet{Spec: clusterv1.MachineSetSpec{Template: machineTemplate("v1.33.0", "t1")}}
	md := &clusterv1.MachineDeployment{Spec: clusterv1.MachineDeploymentSpec{Template: machineTemplate("v1.33.0", "t1")}}

	if c, after := upToDate(ms, nil, now); c.Status != metav1.ConditionTrue || after != 0 {
		t.Errorf("a standalone set's Machine: %+v, recheck %v", c, after)
	}
	if c, _ := upToDate(ms, md, now); c.Status != metav1.ConditionTrue {
		t.Errorf("same template: %+v", c)
	}
	md.Spec.Template.Spec.Version = "v1.34.0"
	c, _ := upToDate(ms, md, now)
	if c.Status != metav1.ConditionFalse || c.Reason != clusterv1.NotUpToDateReason || c.Message != "* Version v1.33.0, v1.34.0 required" {
		t.Errorf("new version: %+v", c)
	}

	md.Spec.Template.Spec.Version = "v1.33.0"
	md.Spec.Rollout.After = metav1.NewTime(now.Add(time.Hour))
	ms.CreationTimestamp = metav1.NewTime(now.Add(-time.Hour))
	if c, after := upToDate(ms, md, now); c.Status != metav1.ConditionTrue || after != time.Hour {
		t.Errorf("rollout.after ahead: %+v, recheck %v, want a recheck in 1h", c, after)
	}
	md.Spec.Rollout.After = metav1.NewTime(now.Add(-time.Minute))
	// Every Machine of a set made before an expired rollout.after is out of
	// date, however recently the set made it: the deployment replaces the set.
	if c, _ := upToDate(ms, md, now); c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, rolloutAfterExpired) {
		t.Errorf("set created before an expired rollout.after: %+v", c)
	}
	ms.CreationTimestamp = metav1.NewTime(now.Add(-time.Second))
	if c, _ := upToDate(ms, md, now); c.Status != metav1.ConditionTrue {
		t.Errorf("set created after rollout.after: %+v", c)
	}
}
