package templates

import (
	"encoding/json"
	"path"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"sigs.k8s.io/yaml"

	bootstrapv1 "capstan.dev/capstan/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "capstan.dev/capstan/api/controlplane/kubeadm/v1beta2"
	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

// qemuObjects renders the QEMU template with its defaults and decodes, strictly
// (a misspelt field would otherwise be dropped without a word and the tuning
// silently lost), its KubeadmControlPlane and MachineHealthCheck.
func qemuObjects(t *testing.T) (*controlplanev1.KubeadmControlPlane, *clusterv1.MachineHealthCheck) {
	t.Helper()
	tmpl, err := Builtin("qemu", "")
	if err != nil {
		t.Fatal(err)
	}
	out, err := Render(tmpl, lookupFrom(map[string]string{"CLUSTER_NAME": "vms", "NAMESPACE": "default", "KUBERNETES_VERSION": "v1.35.8"}))
	if err != nil {
		t.Fatal(err)
	}
	var kcp *controlplanev1.KubeadmControlPlane
	var mhc *clusterv1.MachineHealthCheck
	for _, doc := range strings.Split(out, "\n---\n") {
		var meta struct{ Kind string }
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatal(err)
		}
		var into any
		switch meta.Kind {
		case "KubeadmControlPlane":
			kcp = &controlplanev1.KubeadmControlPlane{}
			into = kcp
		case "MachineHealthCheck":
			mhc = &clusterv1.MachineHealthCheck{}
			into = mhc
		default:
			continue
		}
		if err := yaml.UnmarshalStrict([]byte(doc), into); err != nil {
			t.Fatalf("%s: %v", meta.Kind, err)
		}
	}
	if kcp == nil || mhc == nil {
		t.Fatalf("the QEMU template lacks a KubeadmControlPlane or a MachineHealthCheck:\n%s", out)
	}
	return kcp, mhc
}

func argValue(args []bootstrapv1.Arg, name string) string {
	for _, a := range args {
		if a.Name == name && a.Value != nil {
			return *a.Value
		}
	}
	return ""
}

// TestQEMUTemplateSlowControlPlane checks the tuning that keeps an emulated
// control plane up, in the terms the components themselves check it.
func TestQEMUTemplateSlowControlPlane(t *testing.T) {
	kcp, _ := qemuObjects(t)
	spec := kcp.Spec.KubeadmConfigSpec
	cc := spec.ClusterConfiguration

	// etcd refuses to start unless the election timeout is at least five
	// heartbeat intervals.
	etcd := cc.Etcd.Local.ExtraArgs
	if argValue(etcd, "heartbeat-interval") != "500" || argValue(etcd, "election-timeout") != "5000" {
		t.Errorf("etcd extraArgs %v: want heartbeat-interval 500 and election-timeout 5000", etcd)
	}

	// The leader election library wants lease > renew deadline > 1.2 × retry period.
	for component, args := range map[string][]bootstrapv1.Arg{"controllerManager": cc.ControllerManager.ExtraArgs, "scheduler": cc.Scheduler.ExtraArgs} {
		var d [3]time.Duration
		for i, name := range []string{"leader-elect-lease-duration", "leader-elect-renew-deadline", "leader-elect-retry-period"} {
			var err error
			if d[i], err = time.ParseDuration(argValue(args, name)); err != nil {
				t.Errorf("%s %s: %v", component, name, err)
			}
		}
		if d != [3]time.Duration{60 * time.Second, 40 * time.Second, 10 * time.Second} || d[0] <= d[1] || float64(d[1]) <= 1.2*float64(d[2]) {
			t.Errorf("%s leader election %v: want 60s, 40s, 10s", component, d)
		}
	}

	// init and control-plane joins both read the patches the files write.
	dir := spec.InitConfiguration.Patches.Directory
	if dir == "" || spec.JoinConfiguration.Patches.Directory != dir {
		t.Fatalf("patches directories: init %q, join %q; want the same one on both", dir, spec.JoinConfiguration.Patches.Directory)
	}
	var patch string
	for _, f := range spec.Files {
		if path.Dir(f.Path) == dir {
			// kubeadm's rule: target[suffix][+patchtype].extension.
			m := regexp.MustCompile(`^(kube-apiserver)([^+.]*)(\+(strategic|merge|json))?\.(yaml|json)$`).FindStringSubmatch(path.Base(f.Path))
			if m == nil || (m[4] != "" && m[4] != "strategic") {
				t.Fatalf("patch file %s: want a strategic patch of kube-apiserver", f.Path)
			}
			patch = f.Content
		}
	}
	if patch == "" {
		t.Fatalf("no file in %s", dir)
	}

	// Apply it as kubeadm does, a strategic merge patch of the Pod, to the
	// probes kubeadm writes for the API server.
	probe := func(period, failures int32) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/livez", Port: intstr.FromInt32(6443)}},
			InitialDelaySeconds: 10, TimeoutSeconds: 15, PeriodSeconds: period, FailureThreshold: failures}
	}
	pod := corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{
		Name: "kube-apiserver", Image: "registry.k8s.io/kube-apiserver:v1.35.8",
		LivenessProbe: probe(10, 8), ReadinessProbe: probe(1, 3), StartupProbe: probe(10, 24),
	}}}}
	original, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	patchJSON, err := yaml.YAMLToJSON([]byte(patch))
	if err != nil {
		t.Fatalf("patch does not parse: %v", err)
	}
	patched, err := strategicpatch.StrategicMergePatch(original, patchJSON, corev1.Pod{})
	if err != nil {
		t.Fatalf("patch does not apply: %v", err)
	}
	var got corev1.Pod
	if err := json.Unmarshal(patched, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Spec.Containers) != 1 {
		t.Fatalf("patched Pod has %d containers: the patch must name the existing one", len(got.Spec.Containers))
	}
	c := got.Spec.Containers[0]
	if c.Image != pod.Spec.Containers[0].Image || c.StartupProbe.FailureThreshold != 24 || c.LivenessProbe.HTTPGet == nil {
		t.Errorf("the patch changed more than the probes: %+v", c)
	}
	if c.ReadinessProbe.PeriodSeconds != 10 || c.ReadinessProbe.FailureThreshold != 3 {
		t.Errorf("readiness probe %+v: want every 10 s", c.ReadinessProbe)
	}
	if c.LivenessProbe.FailureThreshold != 30 || c.LivenessProbe.PeriodSeconds != 10 {
		t.Errorf("liveness probe %+v: want 30 failures 10 s apart", c.LivenessProbe)
	}
}

func TestQEMUTemplateWorkerHealthCheck(t *testing.T) {
	_, mhc := qemuObjects(t)
	if mhc.Name != "vms-md-0" || mhc.Spec.ClusterName != "vms" || mhc.Spec.Selector.MatchLabels[clusterv1.MachineDeploymentNameLabel] != "vms-md-0" {
		t.Errorf("MachineHealthCheck %s of cluster %s selects %v: want vms-md-0's workers", mhc.Name, mhc.Spec.ClusterName, mhc.Spec.Selector)
	}
	c := mhc.Spec.Checks
	if c.NodeStartupTimeoutSeconds == nil || *c.NodeStartupTimeoutSeconds != 600 {
		t.Errorf("nodeStartupTimeoutSeconds %v, want 600", c.NodeStartupTimeoutSeconds)
	}
	want := map[corev1.ConditionStatus]bool{corev1.ConditionUnknown: true, corev1.ConditionFalse: true}
	for _, u := range c.UnhealthyNodeConditions {
		if u.Type == corev1.NodeReady && u.TimeoutSeconds != nil && *u.TimeoutSeconds == 300 {
			delete(want, u.Status)
		}
	}
	if len(want) != 0 || len(c.UnhealthyNodeConditions) != 2 {
		t.Errorf("unhealthyNodeConditions %+v: want Ready Unknown and Ready False for 300 s", c.UnhealthyNodeConditions)
	}
}
