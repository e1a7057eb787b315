package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bootstrapv1 "capstan.dev/capstan/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "capstan.dev/capstan/api/controlplane/kubeadm/v1beta2"
	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	localv1 "capstan.dev/capstan/api/infrastructure/local/v1beta2"
)

func TestParseRolloutResource(t *testing.T) {
	for in, want := range map[string]string{
		"md/a": "MachineDeployment/a", "MachineDeployment/a": "MachineDeployment/a", "machinedeployments/a": "MachineDeployment/a",
		"kcp/b": "KubeadmControlPlane/b", "KubeadmControlPlane/b": "KubeadmControlPlane/b",
	} {
		got, err := parseRolloutResource(in)
		if err != nil || got.String() != want {
			t.Errorf("%s: got %v, %v; want %s", in, got, err, want)
		}
	}
	for _, bad := range []string{"md", "md/", "machine/a", "md/a/b", "/a"} {
		if _, err := parseRolloutResource(bad); err == nil || !strings.Contains(err.Error(), "machinedeployment (md) or kubeadmcontrolplane (kcp)") {
			t.Errorf("%s: %v", bad, err)
		}
	}
}

func workerTemplate(version, infra string) clusterv1.MachineTemplateSpec {
	return clusterv1.MachineTemplateSpec{Spec: clusterv1.MachineSpec{ClusterName: "demo", Version: version,
		Bootstrap: clusterv1.Bootstrap{ConfigRef: clusterv1.ContractVersionedObjectReference{
			APIGroup: bootstrapv1.GroupVersion.Group, Kind: "KubeadmConfigTemplate", Name: "demo-md-0"}},
		InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: localv1.GroupVersion.Group, Kind: "LocalMachineTemplate", Name: infra},
	}}
}

func TestRolloutCommands(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	c := env.Client
	rollout := func(args ...string) (string, error) {
		out, _, err := runCapstan(t, append(append([]string{"alpha", "rollout"}, args...), "-n", ns, "--kubeconfig", envKubeconfig())...)
		return out, err
	}
	must := func(out string, err error) string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return out
	}

	// A MachineDeployment at its second revision: its template is that of
	// the MachineSet of revision 2; revision 1 had another version and
	// infrastructure template.
	md := &clusterv1.MachineDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: "demo-md-0", Namespace: ns},
		Spec: clusterv1.MachineDeploymentSpec{ClusterName: "demo", Replicas: ptr.To[int32](3),
			Template: workerTemplate("v1.35.8", "demo-md-0-v2")},
	}
	md.Spec.Template.Labels = map[string]string{"tier": "new"}
	if err := c.Create(ctx, md); err != nil {
		t.Fatal(err)
	}
	for rev, tmpl := range map[string]clusterv1.MachineTemplateSpec{"1": workerTemplate("v1.35.7", "demo-md-0-v1"), "2": md.Spec.Template} {
		tmpl = *tmpl.DeepCopy()
		if tmpl.Labels == nil {
			tmpl.Labels = map[string]string{}
		}
		tmpl.Labels[clusterv1.MachineDeploymentUniqueLabel] = "hash" + rev
		ms := &clusterv1.MachineSet{
			ObjectMeta: metav1.ObjectMeta{Name: "demo-md-0-rev" + rev, Namespace: ns,
				Annotations:     map[string]string{clusterv1.RevisionAnnotation: rev},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "MachineDeployment", Name: md.Name, UID: md.UID, Controller: ptr.To(true)}}},
			Spec: clusterv1.MachineSetSpec{ClusterName: "demo", Replicas: ptr.To[int32](0), Template: tmpl},
		}
		if err := c.Create(ctx, ms); err != nil {
			t.Fatal(err)
		}
	}
	get := func(obj client.Object) {
		t.Helper()
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			t.Fatal(err)
		}
	}

	// pause, pause again (nothing to write), resume.
	must(rollout("pause", "md/demo-md-0"))
	get(md)
	if !ptr.Deref(md.Spec.Paused, false) {
		t.Fatal("pause did not set spec.paused")
	}
	rv := md.ResourceVersion
	if out := must(rollout("pause", "machinedeployment/demo-md-0")); !strings.Contains(out, "already paused") {
		t.Errorf("second pause said %q", out)
	}
	get(md)
	if md.ResourceVersion != rv {
		t.Error("pausing a paused MachineDeployment wrote it")
	}
	if _, err := rollout("restart", "md/demo-md-0"); err == nil || !strings.Contains(err.Error(), "rollout resume md/demo-md-0") {
		t.Errorf("restart of a paused MachineDeployment: %v", err)
	}
	must(rollout("resume", "md/demo-md-0"))
	get(md)
	if md.Spec.Paused != nil {
		t.Errorf("resume left spec.paused %v", *md.Spec.Paused)
	}

	// restart sets rollout.after to now and touches nothing else.
	before := time.Now().Add(-time.Second)
	must(rollout("restart", "md/demo-md-0"))
	get(md)
	if after := md.Spec.Rollout.After.Time; after.Before(before.Truncate(time.Second)) || after.After(time.Now()) {
		t.Errorf("restart set rollout.after %v, want about now", after)
	}
	if *md.Spec.Replicas != 3 || md.Spec.Template.Spec.Version != "v1.35.8" {
		t.Errorf("restart changed more than rollout.after: %+v", md.Spec)
	}

	// undo puts revision 1's template back, without the MachineSet's hash label.
	must(rollout("undo", "md/demo-md-0"))
	get(md)
	if md.Spec.Template.Spec.Version != "v1.35.7" || md.Spec.Template.Spec.InfrastructureRef.Name != "demo-md-0-v1" {
		t.Errorf("undo left template %+v, want revision 1's", md.Spec.Template.Spec)
	}
	if len(md.Spec.Template.Labels) != 0 {
		t.Errorf("undo left template labels %v, want revision 1's (none)", md.Spec.Template.Labels)
	}
	if *md.Spec.Replicas != 3 || md.Spec.Rollout.After.IsZero() {
		t.Errorf("undo changed more than the template: %+v", md.Spec)
	}
	must(rollout("undo", "md/demo-md-0", "--to-revision", "2"))
	get(md)
	if md.Spec.Template.Spec.Version != "v1.35.8" || md.Spec.Template.Labels["tier"] != "new" {
		t.Errorf("undo --to-revision 2 left template %+v", md.Spec.Template)
	}
	// A restart makes a revision of the same template: undoing it has
	// nothing to write.
	rev3 := &clusterv1.MachineSet{
		ObjectMeta: metav1.ObjectMeta{Name: "demo-md-0-rev3", Namespace: ns,
			Annotations:     map[string]string{clusterv1.RevisionAnnotation: "3"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "MachineDeployment", Name: md.Name, UID: md.UID, Controller: ptr.To(true)}}},
		Spec: clusterv1.MachineSetSpec{ClusterName: "demo", Replicas: ptr.To[int32](0), Template: *md.Spec.Template.DeepCopy()},
	}
	if err := c.Create(ctx, rev3); err != nil {
		t.Fatal(err)
	}
	rv = md.ResourceVersion
	if out := must(rollout("undo", "md/demo-md-0")); !strings.Contains(out, "nothing to change") {
		t.Errorf("undo to an identical template said %q", out)
	}
	get(md)
	if md.ResourceVersion != rv {
		t.Error("undo to an identical template wrote the MachineDeployment")
	}
	if _, err := rollout("undo", "md/demo-md-0", "--to-revision", "7"); err == nil || !strings.Contains(err.Error(), "revision 7 of MachineDeployment demo-md-0 is not kept") {
		t.Errorf("undo to a revision not kept: %v", err)
	}

	// KubeadmControlPlane: the paused annotation, rollout.after, no undo.
	kcp := &controlplanev1.KubeadmControlPlane{
		ObjectMeta: metav1.ObjectMeta{Name: "demo-control-plane", Namespace: ns},
		Spec: controlplanev1.KubeadmControlPlaneSpec{Replicas: ptr.To[int32](1), Version: "v1.35.8",
			MachineTemplate: controlplanev1.KubeadmControlPlaneMachineTemplate{Spec: controlplanev1.KubeadmControlPlaneMachineTemplateSpec{
				InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: localv1.GroupVersion.Group, Kind: "LocalMachineTemplate", Name: "cp"}}}},
	}
	if err := c.Create(ctx, kcp); err != nil {
		t.Fatal(err)
	}
	must(rollout("pause", "kcp/demo-control-plane"))
	get(kcp)
	if _, ok := kcp.Annotations[clusterv1.PausedAnnotation]; !ok {
		t.Fatal("pause did not set the paused annotation")
	}
	must(rollout("resume", "kubeadmcontrolplane/demo-control-plane"))
	get(kcp)
	if _, ok := kcp.Annotations[clusterv1.PausedAnnotation]; ok {
		t.Fatal("resume left the paused annotation")
	}
	must(rollout("restart", "kcp/demo-control-plane"))
	get(kcp)
	if kcp.Spec.Rollout.After.IsZero() || time.Since(kcp.Spec.Rollout.After.Time) > time.Minute {
		t.Errorf("restart set rollout.after %v, want about now", kcp.Spec.Rollout.After)
	}
	if _, err := rollout("undo", "kcp/demo-control-plane"); err == nil || !strings.Contains(err.Error(), "undo is supported for MachineDeployments only") {
		t.Errorf("undo of a KubeadmControlPlane: %v", err)
	}
	if _, err := rollout("restart", "md/nope"); err == nil || !strings.Contains(err.Error(), "MachineDeployment "+ns+"/nope") {
		t.Errorf("restart of a missing MachineDeployment: %v", err)
	}
}
