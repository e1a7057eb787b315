package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	controlplanev1 "capstan.dev/capstan/api/controlplane/kubeadm/v1beta2"
	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	qemuv1 "capstan.dev/capstan/api/infrastructure/qemu/v1beta2"
	"capstan.dev/capstan/internal/procstat"
	"capstan.dev/capstan/test/fixture"
)

// vmNetwork is the network a QEMU cluster's VMs share (their second NIC,
// switched in user space by the provider); each VM's address on it is its
// Node's InternalIP.
const vmNetwork = "172.31.0.0/24"

// TestQEMUClusterLifecycle brings up a cluster of QEMU virtual machines (1
// control plane + 1 worker) with the real binary the way a user does,
// `capstan up --cluster vms --infrastructure qemu`, and checks with
// kubectl's API calls, through the cluster's endpoint, that the VMs are
// real Kubernetes nodes (kubeadm, kubelet, containerd):
//
//   - both Nodes Ready with their provider IDs, each at its VM's address
//     on the cluster's network (status.networkAddress) with a pod CIDR of
//     its own, and each VM reporting its kubeadm bootstrap succeeded;
//   - the control plane runs as static Pods in containerd, with kube-proxy
//     on every node and CoreDNS; a container's log is read, a command run
//     in the etcd container (exec) and each kubelet reached through the
//     API server's node proxy;
//   - Pods of the preloaded echo image, one per node, call each other by
//     Pod IP across nodes without masquerade, and a Service by its DNS name
//     (CoreDNS, kube-proxy);
//   - the workers scale from 1 to 2 while a killed worker VM is reported
//     and replaced through the template's MachineHealthCheck;
//   - deleting the cluster leaves no QEMU process, disk, port or network
//     socket.
//
// It needs QEMU and the image tools on the host (under CI=true their
// absence fails it) and builds the guest image on its first run, into the
// cache the QEMU tests share (fixture.QEMUImageCache). The control plane
// gets two vCPUs (an idle emulated control plane keeps about 1.7 busy), the
// workers one: the guests are emulated (TCG) and CI hosts have few cores,
// hence the long waits. Each wait is cut to what is left before go test's
// -timeout (budget), so that a slow run fails with its reason and its VMs
// are still stopped.
func TestQEMUClusterLifecycle(t *testing.T) {
	if testing.Short() {
		t.Skip("boots virtual machines")
	}
	fixture.RequireQEMU(t)
	p := newPlane(t)
	ctx := context.Background()
	config := filepath.Join(t.TempDir(), "vms.yaml")
	// A worker whose Node is not Ready for 5 minutes (the template's
	// default) is remediated, so that the killed VM is replaced; not sooner:
	// while another VM boots, the lone emulated control plane answers
	// slowly and a worker's Node may go NotReady for a while (with 30 s a
	// new worker was replaced for it; with 120 s one CI run's scale-up did
	// not complete in 20 minutes, its worker VMs replaced meanwhile). A
	// new worker gets 20 minutes to join, as an emulated VM on a loaded
	// host may need, so that the health check does not replace one that is
	// only slow.
	if err := os.WriteFile(config, []byte("CONTROL_PLANE_MACHINE_CPUS: 2\nCONTROL_PLANE_MACHINE_MEMORY_MIB: 2048\nWORKER_MACHINE_CPUS: 1\nWORKER_MACHINE_MEMORY_MIB: 1024\n"+
		"WORKER_UNHEALTHY_TIMEOUT_SECONDS: 300\nWORKER_NODE_STARTUP_TIMEOUT_SECONDS: 1200\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The first machine waits for the guest image: built on the cache's
	// first run (each step then shows in the output), reused after.
	started := time.Now()
	// Within --cluster-timeout's default for QEMU (45 minutes) and the
	// plane's start.
	out, code := capstanWithin(t, budget(t, 50*time.Minute), "up", "--state-dir", p.dir, "--qemu-image-cache", fixture.QEMUImageCache(t),
		"--cluster", "vms", "--infrastructure", "qemu", "--config", config)
	t.Logf("capstan up --cluster vms --infrastructure qemu (1 control plane + 1 worker) took %.0fs:\n%s", time.Since(started).Seconds(), out)
	if code != 0 {
		t.Fatalf("capstan up --cluster exited %d; log:\n%s", code, tail(p.log(), 60))
	}
	if !strings.Contains(out, "Cluster vms is ready") || strings.Count(out, " Ready ") != 2 {
		t.Fatalf("up did not report two Ready nodes:\n%s", out)
	}
	mc := p.client()
	path := filepath.Join(p.dir, "vms.kubeconfig")
	wcfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	wl := kubernetes.NewForConfigOrDie(wcfg)
	// What the deletion must remove: the network sockets, found where the
	// VMs' QEMU command lines point, now that they run.
	netDir := qemuNetDir()
	netEntries := clusterNetEntries(t, mc, netDir)

	// Without the nodes nothing else can be checked: stop there (the
	// cleanup stops the plane and the VMs).
	if !t.Run("kubectl through the endpoint sees both nodes Ready with their provider IDs, on the cluster's network", func(t *testing.T) {
		qc := &qemuv1.QEMUCluster{}
		if err := mc.Get(ctx, client.ObjectKey{Namespace: "default", Name: "vms"}, qc); err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(wcfg.Host, ":"+strconv.Itoa(int(qc.Spec.ControlPlaneEndpoint.Port))) {
			t.Errorf("kubeconfig server %s is not the QEMUCluster's endpoint %s", wcfg.Host, qc.Spec.ControlPlaneEndpoint)
		}
		waitReadyNodes(t, wl, 2, budget(t, 15*time.Minute))
		t.Logf("2 Ready nodes %.0fs after capstan up started", time.Since(started).Seconds())
		nodes, err := wl.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range nodes.Items {
			qm := qemuMachineByProviderID(ctx, t, mc, n.Spec.ProviderID)
			if n.Spec.ProviderID != "qemu://default/"+qm.Name || qm.Spec.ProviderID != n.Spec.ProviderID {
				t.Errorf("Node %s has provider ID %q, its QEMUMachine %s %q", n.Name, n.Spec.ProviderID, qm.Name, qm.Spec.ProviderID)
			}
			logVMFigures(t, qm, &n)
		}
		checkQEMUNodes(t, mc, wl, budget(t, 2*time.Minute))
	}) {
		t.FailNow()
	}

	t.Run("the control plane runs as containers", func(t *testing.T) {
		elapsed(t, "checking the control plane's containers")
		fixture.Eventually(t, "the CoreDNS Deployment available", budget(t, 10*time.Minute), func(ctx context.Context) string {
			d, err := wl.AppsV1().Deployments("kube-system").Get(ctx, "coredns", metav1.GetOptions{})
			if err != nil {
				return err.Error()
			}
			want := ptr.Deref(d.Spec.Replicas, 1)
			return fixture.Unless(want > 0 && d.Status.AvailableReplicas == want, fmt.Sprintf("%d of %d replicas available", d.Status.AvailableReplicas, want))
		})
		nodes, err := wl.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var names, controlPlanes []string
		for _, n := range nodes.Items {
			names = append(names, n.Name)
			if _, ok := n.Labels["node-role.kubernetes.io/control-plane"]; ok {
				controlPlanes = append(controlPlanes, n.Name)
			}
		}
		slices.Sort(names)
		if len(controlPlanes) != 1 {
			t.Fatalf("control-plane nodes (kubeadm's role label): %v, want one", controlPlanes)
		}
		cp := controlPlanes[0]
		var apiserver, etcd *corev1.Pod
		fixture.Eventually(t, "the control plane's, kube-proxy's and CoreDNS's Pods running in containerd", budget(t, 5*time.Minute), func(ctx context.Context) string {
			pods, err := wl.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{})
			if err != nil {
				return err.Error()
			}
			byName := map[string]*corev1.Pod{}
			for i := range pods.Items {
				byName[pods.Items[i].Name] = &pods.Items[i]
			}
			// kubeadm's control plane: manifests the kubelet runs, which
			// it shows in the API as mirror Pods named <component>-<node>,
			// marked with the mirror annotation.
			for _, c := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
				p := byName[c+"-"+cp]
				if p == nil {
					return fmt.Sprintf("no Pod %s-%s", c, cp)
				}
				if _, ok := p.Annotations[corev1.MirrorPodAnnotationKey]; !ok {
					return fmt.Sprintf("%s is not a static Pod (no %s annotation)", p.Name, corev1.MirrorPodAnnotationKey)
				}
				if why := onContainerd(p); why != "" {
					return why
				}
			}
			var proxied []string
			dns := 0
			for i := range pods.Items {
				p := &pods.Items[i]
				if p.DeletionTimestamp != nil {
					continue
				}
				switch p.Labels["k8s-app"] {
				case "kube-proxy":
					proxied = append(proxied, p.Spec.NodeName)
				case "kube-dns":
					dns++
				default:
					continue
				}
				if why := onContainerd(p); why != "" {
					return why
				}
			}
			slices.Sort(proxied)
			if !slices.Equal(proxied, names) {
				return fmt.Sprintf("kube-proxy runs on %v, the nodes are %v", proxied, names)
			}
			if dns == 0 {
				return "no CoreDNS Pod"
			}
			apiserver, etcd = byName["kube-apiserver-"+cp], byName["etcd-"+cp]
			return ""
		})

		// kubectl logs -n kube-system kube-apiserver-<node>: the kubelet
		// reads the container's log that containerd keeps.
		var logText string
		fixture.Eventually(t, "kube-apiserver's log", budget(t, time.Minute), func(ctx context.Context) string {
			raw, err := wl.CoreV1().Pods("kube-system").GetLogs(apiserver.Name, &corev1.PodLogOptions{Container: "kube-apiserver", TailLines: ptr.To(int64(20))}).DoRaw(ctx)
			if err != nil {
				return err.Error()
			}
			logText = strings.TrimSpace(string(raw))
			return fixture.Unless(logText != "", "the log is empty")
		})
		t.Logf("kube-apiserver's last log line: %s", logText[strings.LastIndex(logText, "\n")+1:])

		// kubectl exec etcd-<node> -- etcd --version: a process started in
		// the running container, its output streamed back. The version
		// must be the one the image's tag names, when it names one.
		image := ""
		for _, c := range etcd.Spec.Containers {
			if c.Name == "etcd" {
				image = c.Image
			}
		}
		want := imageVersion(image)
		version := execUntil(t, wcfg, wl, etcd, "etcd", budget(t, 2*time.Minute), func(out string) string {
			m := etcdVersion.FindStringSubmatch(out)
			switch {
			case m == nil:
				return "the output names no etcd version"
			case want != "" && m[1] != want:
				return fmt.Sprintf("etcd %s runs from the image %s", m[1], image)
			}
			return ""
		}, "etcd", "--version")
		t.Logf("etcd --version in %s (image %s): %s", etcd.Name, image, etcdVersion.FindString(version))

		// The API server's proxy to each kubelet (what kubectl get --raw
		// /api/v1/nodes/<node>/proxy/... uses): the worker's is reached
		// over the cluster's network. The kubelet's configuration must
		// point its Pods' DNS at the CoreDNS Service.
		dnsService, err := wl.CoreV1().Services("kube-system").Get(ctx, "kube-dns", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			fixture.Eventually(t, "the kubelet of "+n+" through the node proxy", budget(t, 2*time.Minute), func(ctx context.Context) string {
				raw, err := wl.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", n, "proxy", "stats", "summary").DoRaw(ctx)
				if err != nil {
					return "stats/summary: " + err.Error()
				}
				var summary struct {
					Node *struct {
						NodeName string `json:"nodeName"`
					} `json:"node"`
				}
				if err := json.Unmarshal(raw, &summary); err != nil || summary.Node == nil {
					return fmt.Sprintf("stats/summary is no summary of a node (%v): %.300s", err, raw)
				}
				if summary.Node.NodeName != n {
					return fmt.Sprintf("stats/summary is of node %q", summary.Node.NodeName)
				}
				raw, err = wl.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", n, "proxy", "configz").DoRaw(ctx)
				if err != nil {
					return "configz: " + err.Error()
				}
				var configz struct {
					Kubelet *struct {
						ClusterDNS []string `json:"clusterDNS"`
					} `json:"kubeletconfig"`
				}
				if err := json.Unmarshal(raw, &configz); err != nil || configz.Kubelet == nil {
					return fmt.Sprintf("configz holds no kubeletconfig (%v): %.300s", err, raw)
				}
				return fixture.Unless(slices.Contains(configz.Kubelet.ClusterDNS, dnsService.Spec.ClusterIP),
					fmt.Sprintf("the kubelet's clusterDNS %v does not name the kube-dns Service's %s", configz.Kubelet.ClusterDNS, dnsService.Spec.ClusterIP))
			})
		}
	})

	t.Run("pods reach each other across nodes and a Service by DNS name", func(t *testing.T) {
		elapsed(t, "echo Pods calling each other and their Service")
		labels := map[string]string{"app": "echo"}
		deployment := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "echo"},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To(int32(2)),
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{
						// One per node, the control plane's included: the
						// calls between them cross the cluster's network.
						Tolerations: []corev1.Toleration{{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
						Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
							RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
								LabelSelector: &metav1.LabelSelector{MatchLabels: labels},
								TopologyKey:   "kubernetes.io/hostname",
							}},
						}},
						TerminationGracePeriodSeconds: ptr.To(int64(5)),
						Containers: []corev1.Container{{
							Name:  "echo",
							Image: echoImage,
							// Preloaded: the guests pull nothing.
							ImagePullPolicy: corev1.PullNever,
							Ports:           []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
							ReadinessProbe: &corev1.Probe{
								ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}},
								PeriodSeconds: 2,
							},
						}},
					},
				},
			},
		}
		if _, err := wl.AppsV1().Deployments("default").Create(ctx, deployment, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		service := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "echo"},
			Spec: corev1.ServiceSpec{
				Type:     corev1.ServiceTypeClusterIP,
				Selector: labels,
				Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}},
			},
		}
		if _, err := wl.CoreV1().Services("default").Create(ctx, service, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		var pods []corev1.Pod
		fixture.Eventually(t, "2 echo Pods Ready on different nodes", budget(t, 5*time.Minute), func(ctx context.Context) string {
			list, err := wl.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=echo"})
			if err != nil {
				return err.Error()
			}
			pods = nil
			var notReady []string
			for _, p := range list.Items {
				if p.DeletionTimestamp != nil {
					continue
				}
				pods = append(pods, p)
				if !podReady(&p) {
					notReady = append(notReady, fmt.Sprintf("%s on %q not Ready %s", p.Name, p.Spec.NodeName, waitingReasons(&p)))
				}
			}
			switch {
			case len(notReady) > 0:
				return strings.Join(notReady, ", ")
			case len(pods) != 2:
				return fmt.Sprintf("%d echo Pods", len(pods))
			case pods[0].Spec.NodeName == pods[1].Spec.NodeName:
				return "both echo Pods on " + pods[0].Spec.NodeName
			}
			return ""
		})
		// Each node gives its Pods addresses of the /24 its own address
		// names: that is how the other nodes route to them.
		cluster := &clusterv1.Cluster{}
		if err := mc.Get(ctx, client.ObjectKey{Namespace: "default", Name: "vms"}, cluster); err != nil {
			t.Fatal(err)
		}
		podBlock, err := netip.ParsePrefix(cluster.Spec.ClusterNetwork.Pods.CIDRBlocks[0])
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pods {
			n, err := wl.CoreV1().Nodes().Get(ctx, p.Spec.NodeName, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			ips := internalIPs(n)
			if len(ips) != 1 {
				t.Fatalf("Node %s has InternalIPs %v", n.Name, ips)
			}
			subnet := vmPodSubnet(podBlock, ips[0])
			if !inPrefix(subnet, p.Status.PodIP) {
				t.Errorf("Pod %s has address %s, outside its node %s's subnet %s", p.Name, p.Status.PodIP, n.Name, subnet)
			}
			t.Logf("echo Pod %s at %s on %s (subnet %s)", p.Name, p.Status.PodIP, n.Name, subnet)
		}
		// Pod to Pod across nodes: the callee sees the caller's own
		// address, so nothing translated it on the way.
		for i := range pods {
			from, to := &pods[i], &pods[1-i]
			out := execUntil(t, wcfg, wl, from, "echo", budget(t, time.Minute), func(out string) string {
				host, caller, err := echoAnswer(out)
				// The address alone is what matters, should the
				// server add the caller's port.
				if h, _, err := net.SplitHostPort(caller); err == nil {
					caller = h
				}
				switch {
				case err != nil:
					return err.Error()
				case host != to.Name:
					return fmt.Sprintf("answered by %q, not %s", host, to.Name)
				case caller != from.Status.PodIP:
					return fmt.Sprintf("%s saw the call come from %s, not from %s's own address %s", to.Name, caller, from.Name, from.Status.PodIP)
				}
				return ""
			}, echoBinary, "get", "http://"+net.JoinHostPort(to.Status.PodIP, "8080")+"/")
			t.Logf("%s (%s) → %s (%s): %s", from.Name, from.Spec.NodeName, to.Name, to.Spec.NodeName, strings.TrimSpace(out))
		}
		// Pod to Service by name: CoreDNS resolves it, kube-proxy sends
		// the call to one of the Pods. Either may lag behind the Pods'
		// readiness.
		url := "http://echo.default.svc.cluster.local/"
		for i := range pods {
			from := &pods[i]
			out := execUntil(t, wcfg, wl, from, "echo", budget(t, 2*time.Minute), func(out string) string {
				host, _, err := echoAnswer(out)
				switch {
				case err != nil:
					return err.Error()
				case host != pods[0].Name && host != pods[1].Name:
					return fmt.Sprintf("answered by %q, not an echo Pod", host)
				}
				return ""
			}, echoBinary, "get", url)
			t.Logf("%s → %s: %s", from.Name, url, strings.TrimSpace(out))
		}
	})

	// The scale and the health check's repair run at once: the new
	// worker's VM boots while the killed one's Node goes NotReady and waits
	// out the health check's timeout, so the two boots hardly overlap and
	// the emulated guests take half the time they would one after the
	// other.
	t.Run("workers scale 1 → 2 while a killed worker VM is reported and replaced", func(t *testing.T) {
		// The template's health check, with the timeouts of the config.
		mhc := &clusterv1.MachineHealthCheck{}
		if err := mc.Get(ctx, client.ObjectKey{Namespace: "default", Name: "vms-md-0"}, mhc); err != nil {
			t.Fatalf("the template's MachineHealthCheck: %v", err)
		}
		if mhc.Spec.ClusterName != "vms" || mhc.Spec.Selector.MatchLabels[clusterv1.MachineDeploymentNameLabel] != "vms-md-0" {
			t.Errorf("MachineHealthCheck vms-md-0 checks cluster %q, selector %v: not the workers of vms", mhc.Spec.ClusterName, mhc.Spec.Selector)
		}
		if got := ptr.Deref(mhc.Spec.Checks.NodeStartupTimeoutSeconds, 0); got != 1200 {
			t.Errorf("MachineHealthCheck vms-md-0 nodeStartupTimeoutSeconds %d, want WORKER_NODE_STARTUP_TIMEOUT_SECONDS (1200)", got)
		}
		for _, status := range []corev1.ConditionStatus{corev1.ConditionUnknown, corev1.ConditionFalse} {
			found := false
			for _, c := range mhc.Spec.Checks.UnhealthyNodeConditions {
				found = found || c.Type == corev1.NodeReady && c.Status == status && ptr.Deref(c.TimeoutSeconds, 0) == 300
			}
			if !found {
				t.Errorf("MachineHealthCheck vms-md-0 has no Ready=%s check of WORKER_UNHEALTHY_TIMEOUT_SECONDS (300 s): %+v", status, mhc.Spec.Checks.UnhealthyNodeConditions)
			}
		}
		list := &qemuv1.QEMUMachineList{}
		if err := mc.List(ctx, list, client.InNamespace("default"), client.MatchingLabels{clusterv1.MachineDeploymentNameLabel: "vms-md-0"}); err != nil || len(list.Items) != 1 {
			t.Fatalf("worker QEMUMachines: %d, want 1 (%v)", len(list.Items), err)
		}
		victim := list.Items[0]
		if victim.Status.VM.PID == 0 {
			t.Fatalf("worker %s reports no QEMU process: %+v", victim.Name, victim.Status.VM)
		}
		machine := ownerMachine(victim.OwnerReferences)
		defer logWorkerMachinesOnFailure(t, mc)

		// What `kubectl scale machinedeployment vms-md-0 --replicas 2` sends.
		scale := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":2}}`))
		if err := mc.Patch(ctx, &clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "vms-md-0"}}, scale); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Kill(int(victim.Status.VM.PID), syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		started := time.Now()
		fixture.Eventually(t, "the dead VM reported", budget(t, time.Minute), func(ctx context.Context) string {
			qm := &qemuv1.QEMUMachine{}
			if err := mc.Get(ctx, client.ObjectKeyFromObject(&victim), qm); err != nil {
				return "" // already replaced
			}
			return fixture.Condition(qm.Status.Conditions, qemuv1.VMProvisionedCondition, metav1.ConditionFalse)
		})
		// The control plane and two workers, neither of them the killed one.
		waitReplaced(t, mc, wl, machine, 3, budget(t, 25*time.Minute))
		t.Logf("workers 1 → 2 with worker %s killed: 3 Ready nodes %.0fs after the scale and the kill", machine, time.Since(started).Seconds())
		if _, err := os.Stat(victim.Status.VM.Dir); !os.IsNotExist(err) {
			t.Errorf("the replaced VM's directory %s is left (%v)", victim.Status.VM.Dir, err)
		}
		checkQEMUNodes(t, mc, wl, budget(t, 2*time.Minute))
		md := &clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "vms-md-0"}}
		fixture.Eventually(t, "MachineDeployment vms-md-0 with 2 ready replicas", budget(t, 2*time.Minute), func(ctx context.Context) string {
			if err := mc.Get(ctx, client.ObjectKeyFromObject(md), md); err != nil {
				return err.Error()
			}
			return fixture.Unless(ptr.Deref(md.Status.ReadyReplicas, 0) == 2 && ptr.Deref(md.Status.Replicas, 0) == 2,
				fmt.Sprintf("replicas %d, ready %d", ptr.Deref(md.Status.Replicas, 0), ptr.Deref(md.Status.ReadyReplicas, 0)))
		})
	})

	t.Run("deleting the cluster leaves no process, disk, port or network socket", func(t *testing.T) {
		var ports []int32
		var dirs []string
		list := &qemuv1.QEMUMachineList{}
		if err := mc.List(ctx, list, client.InNamespace("default")); err != nil {
			t.Fatal(err)
		}
		for _, qm := range list.Items {
			ports = append(ports, qm.Status.Ports.SSH, qm.Status.Ports.APIServer)
			dirs = append(dirs, qm.Status.VM.Dir)
		}
		qc := &qemuv1.QEMUCluster{}
		if err := mc.Get(ctx, client.ObjectKey{Namespace: "default", Name: "vms"}, qc); err != nil {
			t.Fatal(err)
		}
		ports = append(ports, qc.Spec.ControlPlaneEndpoint.Port)
		dirs = append(dirs, qc.Status.LoadBalancer.Dir)
		for _, e := range netEntries {
			dirs = append(dirs, filepath.Join(netDir, e))
		}
		if err := mc.Delete(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "vms"}}); err != nil {
			t.Fatal(err)
		}
		qemuDir := filepath.Join(p.dir, "qemu")
		fixture.Eventually(t, "everything of the cluster gone", budget(t, 5*time.Minute), func(ctx context.Context) string {
			var left []string
			for _, list := range []client.ObjectList{&clusterv1.ClusterList{}, &qemuv1.QEMUMachineList{}, &qemuv1.QEMUClusterList{}} {
				if err := mc.List(ctx, list, client.InNamespace("default")); err != nil {
					return err.Error()
				}
				if n := meta.LenList(list); n > 0 {
					left = append(left, fmt.Sprintf("%d %T", n, list))
				}
			}
			for _, d := range dirs {
				if _, err := os.Lstat(d); err == nil {
					left = append(left, "directory "+d)
				}
			}
			for _, port := range ports {
				if port == 0 {
					continue
				}
				if c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port))), time.Second); err == nil {
					c.Close()
					left = append(left, fmt.Sprintf("a listener on port %d", port))
				}
			}
			for _, d := range append([]string{qemuDir}, dirs[len(dirs)-len(netEntries):]...) {
				if pids := processesUnder(d); len(pids) > 0 {
					left = append(left, fmt.Sprintf("processes %v under %s", pids, d))
				}
			}
			return strings.Join(left, ", ")
		})
	})
}

// logWorkerMachinesOnFailure logs, when t failed, each worker Machine of
// cluster vms with its phase, age, deletion and conditions that are not
// True, so that a scale that did not complete says which machine stalled
// or was replaced, and why.
func logWorkerMachinesOnFailure(t *testing.T, mc client.Client) {
	if !t.Failed() {
		return
	}
	list := &clusterv1.MachineList{}
	if err := mc.List(context.Background(), list, client.InNamespace("default"), client.MatchingLabels{clusterv1.MachineDeploymentNameLabel: "vms-md-0"}); err != nil {
		t.Logf("listing the worker Machines: %v", err)
		return
	}
	for _, m := range list.Items {
		var notTrue []string
		for _, c := range m.Status.Conditions {
			if c.Status != metav1.ConditionTrue {
				notTrue = append(notTrue, fmt.Sprintf("%s=%s (%s: %s)", c.Type, c.Status, c.Reason, c.Message))
			}
		}
		t.Logf("worker Machine %s: phase %s, age %.0fs, deleting %v; not True: %s",
			m.Name, m.Status.Phase, time.Since(m.CreationTimestamp.Time).Seconds(), m.DeletionTimestamp != nil, strings.Join(notTrue, "; "))
	}
}

// clusterNetEntries are the entries of netDir that the cluster's running
// VMs use for their network sockets: one sub-directory, the cluster's.
// They are found from the QEMU command lines rather than by listing
// netDir, which holds the sockets of every cluster of this user.
func clusterNetEntries(t *testing.T, mc client.Client, netDir string) []string {
	t.Helper()
	list := &qemuv1.QEMUMachineList{}
	if err := mc.List(context.Background(), list, client.InNamespace("default")); err != nil {
		t.Fatal(err)
	}
	var entries []string
	for _, qm := range list.Items {
		if qm.Status.VM.PID == 0 {
			t.Errorf("QEMUMachine %s reports no QEMU process: %+v", qm.Name, qm.Status.VM)
			continue
		}
		names, err := netEntriesNamed(int(qm.Status.VM.PID), netDir)
		if err != nil || len(names) == 0 {
			t.Errorf("the QEMU process %d of %s names no socket under %s (%v)", qm.Status.VM.PID, qm.Name, netDir, err)
		}
		for _, n := range names {
			if !slices.Contains(entries, n) {
				entries = append(entries, n)
			}
		}
	}
	all, err := os.ReadDir(netDir)
	var listed []string
	for _, e := range all {
		listed = append(listed, e.Name())
	}
	t.Logf("the cluster's network sockets are under %s/%v; %s holds %v (%v)", netDir, entries, netDir, listed, err)
	if len(entries) != 1 {
		t.Errorf("the VMs' sockets are in %d entries of %s, want one sub-directory for the cluster: %v", len(entries), netDir, entries)
	}
	for _, e := range entries {
		if fi, err := os.Stat(filepath.Join(netDir, e)); err != nil || !fi.IsDir() {
			t.Errorf("%s is not a directory (%v)", filepath.Join(netDir, e), err)
		}
	}
	return entries
}

// checkQEMUNodes waits until every Node of the cluster is what a QEMU VM
// that joined with kubeadm makes: its VM reports the bootstrap succeeded;
// its only InternalIP is the VM's own address on the cluster's network (a
// second one, such as the 10.0.2.15 every VM has for QEMU's user-mode
// NIC, would be picked by some and reach nothing); it has a /24 of the
// cluster's pod CIDR no other Node has; and its kubelet is of the control
// plane's version and runs containers in containerd.
func checkQEMUNodes(t *testing.T, mc client.Client, wl kubernetes.Interface, timeout time.Duration) {
	t.Helper()
	ctx := context.Background()
	cluster := &clusterv1.Cluster{}
	if err := mc.Get(ctx, client.ObjectKey{Namespace: "default", Name: "vms"}, cluster); err != nil {
		t.Fatal(err)
	}
	if len(cluster.Spec.ClusterNetwork.Pods.CIDRBlocks) == 0 {
		t.Fatal("Cluster vms has no pod CIDR")
	}
	podBlock, err := netip.ParsePrefix(cluster.Spec.ClusterNetwork.Pods.CIDRBlocks[0])
	if err != nil {
		t.Fatal(err)
	}
	kcp := &controlplanev1.KubeadmControlPlane{}
	if err := mc.Get(ctx, client.ObjectKey{Namespace: "default", Name: "vms-control-plane"}, kcp); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, "every Node on the cluster's network, its VM bootstrapped", timeout, func(ctx context.Context) string {
		nodes, err := wl.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err.Error()
		}
		machines := &qemuv1.QEMUMachineList{}
		if err := mc.List(ctx, machines, client.InNamespace("default")); err != nil {
			return err.Error()
		}
		byID := map[string]*qemuv1.QEMUMachine{}
		for i := range machines.Items {
			byID[machines.Items[i].Spec.ProviderID] = &machines.Items[i]
		}
		addresses := map[string]string{}
		for _, n := range nodes.Items {
			qm := byID[n.Spec.ProviderID]
			if qm == nil {
				return fmt.Sprintf("no QEMUMachine has Node %s's provider ID %q", n.Name, n.Spec.ProviderID)
			}
			if why := fixture.Condition(qm.Status.Conditions, qemuv1.BootstrapSucceededCondition, metav1.ConditionTrue); why != "" {
				return qm.Name + ": " + why
			}
			address := qm.Status.NetworkAddress
			if !inPrefix(vmNetwork, address) {
				return fmt.Sprintf("QEMUMachine %s's networkAddress %q is not on %s", qm.Name, address, vmNetwork)
			}
			if ips := internalIPs(&n); len(ips) != 1 || ips[0] != address {
				return fmt.Sprintf("Node %s lists InternalIP %v, its VM %s is at %s", n.Name, ips, qm.Name, address)
			}
			if other, taken := addresses[address]; taken {
				return fmt.Sprintf("Nodes %s and %s are both at %s", other, n.Name, address)
			}
			addresses[address] = n.Name
			// The provider gives each node the /24 of the Pod range its
			// address names (172.31.0.N: 10.244.N.0/24); the template
			// turns the controller manager's own allocation off, so that
			// no Node shows a range its Pods do not use.
			if n.Spec.PodCIDR != "" {
				return fmt.Sprintf("Node %s has pod CIDR %q from the controller manager, but its Pods use %s", n.Name, n.Spec.PodCIDR, vmPodSubnet(podBlock, address))
			}
			info := n.Status.NodeInfo
			if strings.TrimPrefix(info.KubeletVersion, "v") != strings.TrimPrefix(kcp.Spec.Version, "v") {
				return fmt.Sprintf("Node %s runs kubelet %s, the control plane is %s", n.Name, info.KubeletVersion, kcp.Spec.Version)
			}
			if !strings.HasPrefix(info.ContainerRuntimeVersion, "containerd://") {
				return fmt.Sprintf("Node %s runs containers with %q, not containerd", n.Name, info.ContainerRuntimeVersion)
			}
		}
		return ""
	})
}

// logVMFigures logs how long a VM took from its start to its Node's
// registration and readiness, and its QEMU's resident memory.
func logVMFigures(t *testing.T, qm *qemuv1.QEMUMachine, n *corev1.Node) {
	t.Helper()
	var startedAt, readyAt time.Time
	for _, c := range qm.Status.Conditions {
		if c.Type == qemuv1.VMProvisionedCondition && c.Status == metav1.ConditionTrue {
			startedAt = c.LastTransitionTime.Time
		}
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
			readyAt = c.LastTransitionTime.Time
		}
	}
	rss := "unknown"
	if u, err := procstat.Read(int(qm.Status.VM.PID)); err == nil {
		rss = fmt.Sprintf("%.0f MiB", u.RSSMiB)
	}
	t.Logf("FIGURE vm %s: running to Node registered %.0fs, to Ready %.0fs; QEMU RSS %s",
		n.Name, n.CreationTimestamp.Sub(startedAt).Seconds(), readyAt.Sub(startedAt).Seconds(), rss)
}

func qemuMachineByProviderID(ctx context.Context, t *testing.T, c client.Client, id string) *qemuv1.QEMUMachine {
	t.Helper()
	list := &qemuv1.QEMUMachineList{}
	if err := c.List(ctx, list, client.InNamespace("default")); err != nil {
		t.Fatal(err)
	}
	for i := range list.Items {
		if list.Items[i].Spec.ProviderID == id {
			return &list.Items[i]
		}
	}
	t.Fatalf("no QEMUMachine has provider ID %q", id)
	return nil
}

func ownerMachine(refs []metav1.OwnerReference) string {
	for _, r := range refs {
		if r.Kind == "Machine" {
			return r.Name
		}
	}
	return ""
}

// vmPodSubnet is the /24 of podBlock whose third byte is the last byte of
// the node's address on the VMs' network, as the QEMU provider assigns
// them; "" for an address that is not IPv4.
func vmPodSubnet(podBlock netip.Prefix, address string) string {
	a, err := netip.ParseAddr(address)
	if err != nil || !a.Is4() {
		return ""
	}
	b := podBlock.Masked().Addr().As4()
	b[2] += a.As4()[3]
	return netip.PrefixFrom(netip.AddrFrom4(b), 24).String()
}
