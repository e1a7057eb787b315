package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bootstrapv1 "capstan.dev/capstan/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "capstan.dev/capstan/api/controlplane/kubeadm/v1beta2"
	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	localv1 "capstan.dev/capstan/api/infrastructure/local/v1beta2"
	"capstan.dev/capstan/internal/describe"
)

// runCapstan runs the command line in-process with args and returns what
// it printed and its error.
func runCapstan(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	root := newRoot()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

func envKubeconfig() string { return filepath.Join(env.StateDir, "kubeconfig") }

// testCluster writes a small cluster's objects to a real API server, as the
// controllers would have left them: a Cluster with one control-plane
// Machine and a MachineDeployment of two workers, one of them not ready.
type testCluster struct {
	t   *testing.T
	ns  string
	now time.Time
}

func (tc *testCluster) cond(typ string, status metav1.ConditionStatus, reason string, age time.Duration, msg string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg, LastTransitionTime: metav1.NewTime(tc.now.Add(-age))}
}

// create creates obj, then writes its status (set by setStatus on the
// object the server returned).
func (tc *testCluster) create(obj client.Object, setStatus func()) {
	tc.t.Helper()
	ctx := context.Background()
	obj.SetNamespace(tc.ns)
	if err := env.Client.Create(ctx, obj); err != nil {
		tc.t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
	if setStatus != nil {
		setStatus()
		if err := env.Client.Status().Update(ctx, obj); err != nil {
			tc.t.Fatalf("writing the status of %T %s: %v", obj, obj.GetName(), err)
		}
	}
}

func ownedBy(owner client.Object, kind string) []metav1.OwnerReference {
	return []metav1.OwnerReference{{APIVersion: owner.GetObjectKind().GroupVersionKind().GroupVersion().String(), Kind: kind,
		Name: owner.GetName(), UID: owner.GetUID(), Controller: ptr.To(true)}}
}

func (tc *testCluster) machine(name string, owner client.Object, ownerKind string, labels map[string]string, ready metav1.Condition) {
	tc.t.Helper()
	lm := &localv1.LocalMachine{ObjectMeta: metav1.ObjectMeta{Name: name}}
	tc.create(lm, func() {
		lm.Status.Conditions = []metav1.Condition{tc.cond("Ready", metav1.ConditionTrue, "Ready", time.Hour, "")}
	})
	kc := &bootstrapv1.KubeadmConfig{ObjectMeta: metav1.ObjectMeta{Name: name}}
	tc.create(kc, func() {
		kc.Status.Conditions = []metav1.Condition{tc.cond("Ready", metav1.ConditionTrue, "Ready", time.Hour, "")}
	})
	labels[clusterv1.ClusterNameLabel] = "demo"
	m := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, OwnerReferences: ownedBy(owner, ownerKind)},
		Spec: clusterv1.MachineSpec{ClusterName: "demo", Version: "v1.35.8",
			Bootstrap: clusterv1.Bootstrap{ConfigRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: bootstrapv1.GroupVersion.Group, Kind: "KubeadmConfig", Name: name}},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: localv1.GroupVersion.Group, Kind: "LocalMachine", Name: name},
		},
	}
	tc.create(m, func() {
		m.Status.Conditions = []metav1.Condition{ready, tc.cond("UpToDate", metav1.ConditionTrue, "UpToDate", 2*time.Hour, "")}
	})
}

func createTestCluster(t *testing.T, ns string, now time.Time) {
	tc := &testCluster{t: t, ns: ns, now: now}
	lc := &localv1.LocalCluster{ObjectMeta: metav1.ObjectMeta{Name: "demo"}}
	tc.create(lc, func() {
		lc.Status.Conditions = []metav1.Condition{tc.cond("Ready", metav1.ConditionTrue, "Ready", 3*time.Hour, "")}
	})
	cluster := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: "demo"},
		Spec: clusterv1.ClusterSpec{
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: localv1.GroupVersion.Group, Kind: "LocalCluster", Name: "demo"},
			ControlPlaneRef:   clusterv1.ContractVersionedObjectReference{APIGroup: controlplanev1.GroupVersion.Group, Kind: "KubeadmControlPlane", Name: "demo-control-plane"},
		},
	}
	tc.create(cluster, func() {
		cluster.Status.ControlPlane = &clusterv1.ClusterControlPlaneStatus{DesiredReplicas: ptr.To[int32](1), Replicas: ptr.To[int32](1),
			ReadyReplicas: ptr.To[int32](1), AvailableReplicas: ptr.To[int32](1), UpToDateReplicas: ptr.To[int32](1)}
		cluster.Status.Workers = &clusterv1.WorkersStatus{DesiredReplicas: ptr.To[int32](2), Replicas: ptr.To[int32](2),
			ReadyReplicas: ptr.To[int32](1), AvailableReplicas: ptr.To[int32](1), UpToDateReplicas: ptr.To[int32](2)}
		cluster.Status.Conditions = []metav1.Condition{
			tc.cond("Available", metav1.ConditionTrue, "Available", 3*time.Hour, ""),
			tc.cond("WorkerMachinesReady", metav1.ConditionFalse, "NotReady", 4*time.Minute, "* Machine demo-md-0-abc-2: NodeReady: Node is not ready"),
		}
	})
	kcp := &controlplanev1.KubeadmControlPlane{
		ObjectMeta: metav1.ObjectMeta{Name: "demo-control-plane", Labels: map[string]string{clusterv1.ClusterNameLabel: "demo"}},
		Spec: controlplanev1.KubeadmControlPlaneSpec{Replicas: ptr.To[int32](1), Version: "v1.35.8",
			MachineTemplate: controlplanev1.KubeadmControlPlaneMachineTemplate{Spec: controlplanev1.KubeadmControlPlaneMachineTemplateSpec{
				InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: localv1.GroupVersion.Group, Kind: "LocalMachineTemplate", Name: "demo-control-plane"}}}},
	}
	tc.create(kcp, func() {
		kcp.Status.Replicas, kcp.Status.ReadyReplicas, kcp.Status.AvailableReplicas, kcp.Status.UpToDateReplicas = ptr.To[int32](1), ptr.To[int32](1), ptr.To[int32](1), ptr.To[int32](1)
		kcp.Status.Conditions = []metav1.Condition{tc.cond("Available", metav1.ConditionTrue, "Available", 3*time.Hour, "")}
	})
	kcp.SetGroupVersionKind(controlplanev1.GroupVersion.WithKind("KubeadmControlPlane"))
	tc.machine("demo-control-plane-x1", kcp, "KubeadmControlPlane",
		map[string]string{clusterv1.MachineControlPlaneLabel: "", clusterv1.MachineControlPlaneNameLabel: "demo-control-plane"},
		tc.cond("Ready", metav1.ConditionTrue, "Ready", 3*time.Hour, ""))

	template := clusterv1.MachineTemplateSpec{Spec: clusterv1.MachineSpec{ClusterName: "demo", Version: "v1.35.8",
		Bootstrap: clusterv1.Bootstrap{ConfigRef: clusterv1.ContractVersionedObjectReference{
			APIGroup: bootstrapv1.GroupVersion.Group, Kind: "KubeadmConfigTemplate", Name: "demo-md-0"}},
		InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: localv1.GroupVersion.Group, Kind: "LocalMachineTemplate", Name: "demo-md-0"},
	}}
	md := &clusterv1.MachineDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: "demo-md-0", Labels: map[string]string{clusterv1.ClusterNameLabel: "demo"}},
		Spec:       clusterv1.MachineDeploymentSpec{ClusterName: "demo", Replicas: ptr.To[int32](2), Template: template},
	}
	tc.create(md, func() {
		md.Status.Replicas, md.Status.ReadyReplicas, md.Status.AvailableReplicas, md.Status.UpToDateReplicas = ptr.To[int32](2), ptr.To[int32](1), ptr.To[int32](1), ptr.To[int32](2)
		md.Status.Conditions = []metav1.Condition{tc.cond("Available", metav1.ConditionTrue, "Available", 3*time.Hour, "")}
	})
	md.SetGroupVersionKind(clusterv1.GroupVersion.WithKind("MachineDeployment"))
	ms := &clusterv1.MachineSet{
		ObjectMeta: metav1.ObjectMeta{Name: "demo-md-0-abc", OwnerReferences: ownedBy(md, "MachineDeployment"),
			Labels:      map[string]string{clusterv1.ClusterNameLabel: "demo", clusterv1.MachineDeploymentNameLabel: "demo-md-0"},
			Annotations: map[string]string{clusterv1.RevisionAnnotation: "1"}},
		Spec: clusterv1.MachineSetSpec{ClusterName: "demo", Replicas: ptr.To[int32](2), Template: template},
	}
	tc.create(ms, func() {
		ms.Status.Replicas, ms.Status.ReadyReplicas, ms.Status.AvailableReplicas, ms.Status.UpToDateReplicas = ptr.To[int32](2), ptr.To[int32](1), ptr.To[int32](1), ptr.To[int32](2)
		ms.Status.Conditions = []metav1.Condition{tc.cond("MachinesReady", metav1.ConditionFalse, "NotReady", 4*time.Minute, "* Machine demo-md-0-abc-2: NodeReady: Node is not ready")}
	})
	ms.SetGroupVersionKind(clusterv1.GroupVersion.WithKind("MachineSet"))
	workerLabels := func() map[string]string {
		return map[string]string{clusterv1.MachineDeploymentNameLabel: "demo-md-0", clusterv1.MachineSetNameLabel: "demo-md-0-abc"}
	}
	tc.machine("demo-md-0-abc-1", ms, "MachineSet", workerLabels(), tc.cond("Ready", metav1.ConditionTrue, "Ready", 2*time.Hour, ""))
	tc.machine("demo-md-0-abc-2", ms, "MachineSet", workerLabels(), tc.cond("Ready", metav1.ConditionFalse, "NotReady", 4*time.Minute, "* NodeReady: Node is not ready"))
}

func TestDescribeClusterCommand(t *testing.T) {
	ns := env.Namespace(t)
	now := time.Now().UTC().Truncate(time.Second)
	createTestCluster(t, ns, now)
	describeClock = func() time.Time { return now }
	t.Cleanup(func() { describeClock = time.Now })

	base := []string{"describe", "cluster", "demo", "-n", ns, "--kubeconfig", envKubeconfig()}
	out, errOut, err := runCapstan(t, append(base, "--show-machinesets")...)
	if err != nil {
		t.Fatalf("describe: %v\n%s", err, errOut)
	}
	if errOut != "" {
		t.Errorf("describe warned: %s", errOut)
	}
	golden(t, "describe-cluster.golden", []byte(out))

	out, _, err = runCapstan(t, append(base, "--grouping=false", "--echo", "--show-conditions", "Cluster", "--color")...)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "describe-cluster-echo-conditions-color.golden", []byte(out))

	out, _, err = runCapstan(t, append(base, "-o", "json")...)
	if err != nil {
		t.Fatal(err)
	}
	var tree describe.Node
	if err := json.Unmarshal([]byte(out), &tree); err != nil {
		t.Fatalf("-o json is not JSON: %v\n%s", err, out)
	}
	if tree.Name != "demo" || len(tree.Children) != 3 || tree.Children[2].Role != describe.RoleWorkers ||
		tree.Children[1].Replicas == nil || *tree.Children[1].Replicas.Ready != 1 {
		t.Errorf("unexpected JSON tree:\n%s", out)
	}

	_, _, err = runCapstan(t, "describe", "cluster", "nope", "-n", ns, "--kubeconfig", envKubeconfig())
	if err == nil || !strings.Contains(err.Error(), "cluster nope not found in namespace "+ns) {
		t.Errorf("describe of a missing cluster: %v", err)
	}
	if code := exitCodeOf(err); code == 0 {
		t.Error("describe of a missing cluster exits 0")
	}
	if _, _, err := runCapstan(t, append(base, "-o", "xml")...); err == nil || !strings.Contains(err.Error(), "--output") {
		t.Errorf("-o xml: %v", err)
	}
}

// exitCodeOf is the process exit code Main would return for err.
func exitCodeOf(err error) int {
	if err == nil {
		return 0
	}
	if e, ok := err.(exitError); ok {
		return e.code
	}
	return 1
}

func TestGetKubeconfigCommand(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	args := func(name string) []string {
		return []string{"get", "kubeconfig", name, "-n", ns, "--kubeconfig", envKubeconfig()}
	}
	if _, _, err := runCapstan(t, args("demo")...); err == nil || !strings.Contains(err.Error(), "cluster demo not found") {
		t.Errorf("without a Cluster: %v", err)
	}
	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: ns}, Spec: clusterv1.ClusterSpec{
		InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: localv1.GroupVersion.Group, Kind: "LocalCluster", Name: "demo"}}}
	if err := env.Client.Create(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	if _, _, err := runCapstan(t, args("demo")...); err == nil || !strings.Contains(err.Error(), "has no kubeconfig yet") {
		t.Errorf("without the Secret: %v", err)
	}
	const kubeconfig = "apiVersion: v1\nkind: Config\nclusters: []\n"
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "demo-kubeconfig", Namespace: ns},
		Data: map[string][]byte{"value": []byte(kubeconfig)}}
	if err := env.Client.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	out, _, err := runCapstan(t, args("demo")...)
	if err != nil || out != kubeconfig {
		t.Errorf("got %q, %v; want the Secret's value", out, err)
	}
}

// TestManagementClusterChoice: the cluster --kubeconfig or --state-dir
// names on the command line (refusing both), then $KUBECONFIG's, then the
// running plane of the default state directory; for describe and move
// alike. A move from another cluster than the one the user named is the
// accident this order prevents.
func TestManagementClusterChoice(t *testing.T) {
	ns := env.Namespace(t)
	createTestCluster(t, ns, time.Now())
	bogus := filepath.Join(t.TempDir(), "bogus.kubeconfig")
	if err := os.WriteFile(bogus, []byte("not: a kubeconfig"), 0o600); err != nil {
		t.Fatal(err)
	}
	stopped := t.TempDir()
	// A stopped plane's kubeconfig left behind is not a management cluster.
	if err := os.WriteFile(filepath.Join(stopped, "kubeconfig"), []byte("not: a kubeconfig"), 0o600); err != nil {
		t.Fatal(err)
	}
	describeWith := func(args ...string) error {
		_, _, err := runCapstan(t, append([]string{"describe", "cluster", "demo", "-n", ns, "-o", "json"}, args...)...)
		return err
	}
	// move finds its source by the same rule.
	moveWith := func(args ...string) error {
		_, _, err := runCapstan(t, append([]string{"move", "--dry-run", "--to-directory", t.TempDir(), "-n", ns}, args...)...)
		return err
	}
	t.Setenv("KUBECONFIG", bogus)
	if err := describeWith("--state-dir", env.StateDir); err != nil {
		t.Errorf("--state-dir's running plane was not used over $KUBECONFIG: %v", err)
	}
	if err := moveWith("--state-dir", env.StateDir); err != nil {
		t.Errorf("move: --state-dir's running plane was not used over $KUBECONFIG: %v", err)
	}
	if err := describeWith("--kubeconfig", envKubeconfig()); err != nil {
		t.Errorf("--kubeconfig did not come before $KUBECONFIG: %v", err)
	}
	if err := describeWith("--state-dir", stopped); err == nil || !strings.Contains(err.Error(), "--state-dir "+stopped+": capstan is not running there") {
		t.Errorf("--state-dir of a stopped plane: %v", err)
	}
	if err := moveWith("--state-dir", stopped); err == nil || !strings.Contains(err.Error(), "--state-dir "+stopped+": capstan is not running there") {
		t.Errorf("move: --state-dir of a stopped plane: %v", err)
	}
	both := "--kubeconfig " + envKubeconfig() + " and --state-dir " + env.StateDir + " both name a management cluster"
	if err := describeWith("--state-dir", env.StateDir, "--kubeconfig", envKubeconfig()); err == nil || !strings.Contains(err.Error(), both) {
		t.Errorf("--kubeconfig and --state-dir together: %v", err)
	}
	t.Setenv("KUBECONFIG", envKubeconfig())
	t.Setenv("CAPSTAN_STATE_DIR", stopped)
	if err := describeWith(); err != nil {
		t.Errorf("$KUBECONFIG was not used: %v", err)
	}
	if err := describeWith("--kubeconfig", bogus); err == nil || !strings.Contains(err.Error(), "--kubeconfig "+bogus) {
		t.Errorf("--kubeconfig did not come first: %v", err)
	}
	t.Setenv("KUBECONFIG", "")
	t.Setenv("HOME", t.TempDir())
	t.Setenv("CAPSTAN_STATE_DIR", env.StateDir)
	if err := describeWith(); err != nil {
		t.Errorf("the default state directory's running plane was not used without flags and $KUBECONFIG: %v", err)
	}
	if err := moveWith(); err != nil {
		t.Errorf("move: the default state directory's running plane was not used without flags and $KUBECONFIG: %v", err)
	}
	t.Setenv("CAPSTAN_STATE_DIR", stopped)
	if err := describeWith(); err == nil || !strings.Contains(err.Error(), "no management cluster") {
		t.Errorf("without any management cluster: %v", err)
	}
	if err := moveWith(); err == nil || !strings.Contains(err.Error(), "no management cluster") {
		t.Errorf("move without any management cluster: %v", err)
	}
}
