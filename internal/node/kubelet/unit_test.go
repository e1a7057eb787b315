package kubelet

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

func TestLabelRestricted(t *testing.T) {
	for key, want := range map[string]bool{
		"node-role.kubernetes.io/control-plane":           true,
		"node-role.kubernetes.io/worker":                  true,
		"node-restriction.kubernetes.io/pool":             true,
		"example.node-restriction.kubernetes.io/pool":     true,
		"custom.k8s.io/thing":                             true,
		"kubernetes.io/hostname":                          false,
		"kubernetes.io/os":                                false,
		"node.kubernetes.io/instance-type":                false,
		"topology.kubernetes.io/zone":                     false,
		"kubelet.kubernetes.io/anything":                  false,
		"example.com/pool":                                false,
		"plain":                                           false,
		"cluster.x-k8s.io/cluster-name":                   false,
		"node.cluster.x-k8s.io/uninitialized":             false,
		"beta.kubernetes.io/arch":                         false,
		"failure-domain.beta.kubernetes.io/zone":          false,
		"node-role.kubernetes.io.example.com/not-k8s-one": false,
	} {
		if got := labelRestricted(key); got != want {
			t.Errorf("labelRestricted(%q) = %v, want %v", key, got, want)
		}
	}
	own, restricted := splitLabels(map[string]string{"node-role.kubernetes.io/control-plane": "", "example.com/a": "b"})
	if len(own) != 1 || own["example.com/a"] != "b" || len(restricted) != 1 {
		t.Errorf("splitLabels: own %v restricted %v", own, restricted)
	}
}

func TestIPAllocator(t *testing.T) {
	cidr, base := nodePodCIDR("node-a")
	if cidr2, _ := nodePodCIDR("node-a"); cidr2 != cidr {
		t.Fatalf("pod CIDR not stable: %s then %s", cidr, cidr2)
	}
	if !strings.HasPrefix(cidr, "10.244.") || !strings.HasSuffix(cidr, ".0/24") {
		t.Fatalf("pod CIDR %s is not a /24 of 10.244.0.0/16", cidr)
	}
	prefix := netip.MustParsePrefix(cidr)
	a := newIPAllocator(base)

	// A restarted kubelet learns existing addresses first.
	taken := netip.AddrFrom4([4]byte{10, 244, base.As4()[2], 7})
	a.reserve("old", taken)
	a.reserve("intruder", taken) // already someone's: ignored
	a.reserve("foreign", netip.MustParseAddr("192.168.0.9"))

	seen := map[netip.Addr]types.UID{taken: "old"}
	for i := 0; i < podHosts-1; i++ {
		uid := types.UID(strings.Repeat("u", 1+i%5) + string(rune('a'+i%26)) + string(rune('0'+i/26)))
		ip, err := a.allocate(uid)
		if err != nil {
			t.Fatalf("allocation %d: %v", i, err)
		}
		again, _ := a.allocate(uid)
		if again != ip {
			t.Fatalf("pod %s got %s then %s", uid, ip, again)
		}
		if other, dup := seen[ip]; dup {
			t.Fatalf("%s given to %s and %s", ip, other, uid)
		}
		if !prefix.Contains(ip) || ip.As4()[3] < 2 || ip.As4()[3] > 254 {
			t.Fatalf("%s outside the usable hosts of %s", ip, cidr)
		}
		seen[ip] = uid
	}
	if _, err := a.allocate("one-too-many"); err == nil {
		t.Fatal("allocating past the /24's hosts succeeded")
	}
	a.release("old")
	ip, err := a.allocate("after-release")
	if err != nil || ip != taken {
		t.Fatalf("after release got %s, %v; want %s", ip, err, taken)
	}
}

func TestDesiredPodStatusIsStable(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{UID: "u1"},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{
				{Name: "setup", Image: "busybox"},
				{Name: "sidecar", Image: "proxy", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)},
			},
			Containers: []corev1.Container{{Name: "app", Image: "app:1"}, {Name: "log", Image: "log:2"}},
		},
		Status: corev1.PodStatus{QOSClass: corev1.PodQOSBestEffort, Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Unix(100, 0)},
			{Type: corev1.DisruptionTarget, Status: corev1.ConditionFalse},
		}},
	}
	t0 := metav1.Unix(1000, 0)
	st := desiredPodStatus(pod, "10.244.1.2", "127.0.0.1", t0, true)
	if podStatusCurrent(pod.Status, st) {
		t.Fatal("a pending pod's status counts as current")
	}
	if st.Phase != corev1.PodRunning || st.PodIP != "10.244.1.2" || st.HostIP != "127.0.0.1" || st.StartTime == nil {
		t.Fatalf("status %+v", st)
	}
	if c := findPodCondition(st.Conditions, corev1.PodScheduled); c.LastTransitionTime != metav1.Unix(100, 0) {
		t.Errorf("PodScheduled transition time not kept: %v", c.LastTransitionTime)
	}
	if len(st.ContainerStatuses) != 2 || !st.ContainerStatuses[1].Ready || st.ContainerStatuses[1].State.Running == nil ||
		!strings.HasPrefix(st.ContainerStatuses[0].ContainerID, "capstan://") || st.ContainerStatuses[0].Image != "app:1" {
		t.Errorf("container statuses %+v", st.ContainerStatuses)
	}
	if st.ContainerStatuses[0].ContainerID == st.ContainerStatuses[1].ContainerID {
		t.Error("two containers share an ID")
	}
	if s := st.InitContainerStatuses[0]; s.State.Terminated == nil || s.State.Terminated.Reason != "Completed" {
		t.Errorf("init container status %+v", s)
	}
	if s := st.InitContainerStatuses[1]; s.State.Running == nil || !s.Ready {
		t.Errorf("sidecar status %+v", s)
	}

	// Written, then computed again later: nothing to write.
	pod.Status = *st.DeepCopy()
	pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionFalse})
	later := desiredPodStatus(pod, "10.244.1.2", "127.0.0.1", metav1.NewTime(t0.Add(time.Hour)), true)
	if !podStatusCurrent(pod.Status, later) {
		t.Fatalf("an unchanged pod's status is not current:\n%+v\n%+v", pod.Status, later)
	}

	// Readiness lost: a write, with Ready's transition time moving.
	notReady := desiredPodStatus(pod, "10.244.1.2", "127.0.0.1", metav1.NewTime(t0.Add(time.Hour)), false)
	if podStatusCurrent(pod.Status, notReady) {
		t.Fatal("losing readiness is not a change")
	}
	if c := findPodCondition(notReady.Conditions, corev1.PodReady); c.Status != corev1.ConditionFalse || !c.LastTransitionTime.Equal(ptr.To(metav1.NewTime(t0.Add(time.Hour)))) {
		t.Errorf("Ready condition %+v", c)
	}
	if notReady.ContainerStatuses[0].Ready {
		t.Error("container still ready")
	}
}

func TestNodeStatus(t *testing.T) {
	o := Options{NodeName: "n1", KubeletVersion: "v1.34.2", Address: "127.0.0.1", HeartbeatInterval: time.Second}
	t0 := metav1.Unix(1000, 0)
	st := desiredNodeStatus(o, t0, nil)
	if st.NodeInfo.KubeletVersion != "v1.34.2" || st.NodeInfo.OSImage != osImage || st.NodeInfo.KubeProxyVersion != "" {
		t.Errorf("nodeInfo %+v", st.NodeInfo)
	}
	if r := findNodeCondition(st.Conditions, corev1.NodeReady); r == nil || r.Status != corev1.ConditionTrue || r.Reason != "KubeletReady" {
		t.Errorf("Ready %+v", r)
	}
	if nodeStatusCurrent(corev1.NodeStatus{}, st) {
		t.Error("an empty status counts as current")
	}
	current := *st.DeepCopy()
	current.Conditions = append(current.Conditions, corev1.NodeCondition{Type: corev1.NodeNetworkUnavailable, Status: corev1.ConditionFalse})
	later := desiredNodeStatus(o, metav1.NewTime(t0.Add(time.Minute)), &current)
	if !nodeStatusCurrent(current, later) {
		t.Error("an unchanged status is not current")
	}
	if r := findNodeCondition(later.Conditions, corev1.NodeReady); !r.LastTransitionTime.Equal(&t0) {
		t.Errorf("Ready transition time moved to %v", r.LastTransitionTime)
	}
	if heartbeatDue(current, t0.Add(3*time.Second), 4*time.Second) || !heartbeatDue(current, t0.Add(4*time.Second), 4*time.Second) {
		t.Error("heartbeatDue is off")
	}
	// The node lifecycle controller marked it unknown: rewrite at once.
	findNodeCondition(current.Conditions, corev1.NodeReady).Status = corev1.ConditionUnknown
	if nodeStatusCurrent(current, desiredNodeStatus(o, t0, &current)) {
		t.Error("Ready=Unknown counts as current")
	}
}

func TestStaticPodHash(t *testing.T) {
	a := StaticPod{Component: "etcd", Annotations: map[string]string{"x": "1", "y": "2"}}
	b := StaticPod{Component: "etcd", Annotations: map[string]string{"y": "2", "x": "1"}}
	if staticPodHash(a, "i") != staticPodHash(b, "i") {
		t.Error("hash depends on map order")
	}
	b.Annotations["x"] = "3"
	if staticPodHash(a, "i") == staticPodHash(b, "i") {
		t.Error("hash ignores annotation values")
	}
	if staticPodHash(a, "i") == staticPodHash(a, "j") {
		t.Error("hash ignores the image")
	}
}

func TestOptionsValidate(t *testing.T) {
	o := Options{StaticPods: []StaticPod{{Component: "etcd"}, {Component: "etcd"}, {}}}
	err := o.validate()
	if err == nil {
		t.Fatal("invalid options accepted")
	}
	for _, want := range []string{"Options.Config", "Options.NodeName", `StaticPods[1].Component "etcd" is listed twice`, "StaticPods[2].Component is empty"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}
