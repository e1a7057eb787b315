package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	qemuv1 "capstan.dev/capstan/api/infrastructure/qemu/v1beta2"
)

// TestClusterProgressNamesTheImageBuild checks that `capstan up --cluster`
// tells the QEMU guest image's build in its summary, the one line a log or
// a pipe sees, so that each step of a wait of minutes shows there, and a
// failed build too, and that the summary drops it once the Machine has moved
// on.
func TestClusterProgressNamesTheImageBuild(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	tc := &testCluster{t: t, ns: ns, now: time.Now()}
	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "vms"}, Spec: clusterv1.ClusterSpec{
		InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: qemuv1.GroupVersion.Group, Kind: "QEMUCluster", Name: "vms"}}}
	tc.create(cluster, nil)
	step := "building the guest image: installing Debian packages (mmdebstrap)"
	m := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: "vms-cp-1", Labels: map[string]string{clusterv1.ClusterNameLabel: "vms"}},
		Spec: clusterv1.MachineSpec{ClusterName: "vms", Version: "v1.35.8",
			Bootstrap:         clusterv1.Bootstrap{DataSecretName: new("vms-cp-1")},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: qemuv1.GroupVersion.Group, Kind: "QEMUMachine", Name: "vms-cp-1"},
		},
	}
	tc.create(m, func() {
		m.Status.Phase = string(clusterv1.MachinePhaseProvisioning)
		m.Status.Conditions = []metav1.Condition{tc.cond(clusterv1.InfrastructureReadyCondition, metav1.ConditionFalse, qemuv1.BuildingImageReason, time.Minute, step)}
	})

	got := clusterProgress(ctx, env.Client, ns, "vms", 1)
	if want := "machines 0/1 running (1 Provisioning); control plane not initialized yet; " + step; got.summary != want {
		t.Errorf("while the image builds the summary is\n  %q\nwant\n  %q", got.summary, want)
	}

	failed := "building the guest image failed: image: building the guest image needs mmdebstrap on PATH: install the Debian packages mmdebstrap, e2fsprogs and qemu-utils"
	m.Status.Conditions = []metav1.Condition{tc.cond(clusterv1.InfrastructureReadyCondition, metav1.ConditionFalse, qemuv1.ImageFailedReason, 0, failed)}
	if err := env.Client.Status().Update(ctx, m); err != nil {
		t.Fatal(err)
	}
	if got := clusterProgress(ctx, env.Client, ns, "vms", 1); !strings.HasSuffix(got.summary, "; "+failed) {
		t.Errorf("when the build fails the summary is %q; want it to end with the failure", got.summary)
	}

	m.Status.Phase = string(clusterv1.MachinePhaseProvisioned)
	m.Status.Conditions = []metav1.Condition{tc.cond(clusterv1.InfrastructureReadyCondition, metav1.ConditionTrue, "Ready", 0, "")}
	if err := env.Client.Status().Update(ctx, m); err != nil {
		t.Fatal(err)
	}
	if got := clusterProgress(ctx, env.Client, ns, "vms", 1); strings.Contains(got.summary, "guest image") {
		t.Errorf("once the VM is provisioned the summary still names the image: %q", got.summary)
	}
}
