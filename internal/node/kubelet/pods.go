package kubelet

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"net/netip"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"capstan.dev/capstan/internal/deploy"
)

// podEvent queues a pod for its status or deletion to be handled. Changes
// to mirror pods also wake the status loop, which owns them.
func (k *kubelet) podEvent(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	k.reserveIP(pod)
	if isMirrorPod(pod) {
		notify(k.statusCh)
	}
	if key, err := cache.MetaNamespaceKeyFunc(pod); err == nil {
		k.queue.Add(key)
	}
}

func (k *kubelet) podDeleted(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	k.ips.release(pod.UID)
	if k.procs.get(pod.UID) != nil {
		// Gone without a graceful deletion we saw (for example deleted
		// with grace period 0): its processes go too.
		uid := pod.UID
		grace := pod.DeletionGracePeriodSeconds
		go func() { <-k.procs.stop(uid, grace); k.procs.forget(uid) }()
	}
	if isMirrorPod(pod) {
		// Re-create it if it is one of ours.
		notify(k.statusCh)
	}
}

// reserveIP records the IP a pod already has, so a restarted kubelet never
// hands it to another pod.
func (k *kubelet) reserveIP(pod *corev1.Pod) {
	if pod.Spec.HostNetwork || pod.Status.PodIP == "" {
		return
	}
	if ip, err := netip.ParseAddr(pod.Status.PodIP); err == nil {
		k.ips.reserve(pod.UID, ip)
	}
}

func isMirrorPod(pod *corev1.Pod) bool {
	_, ok := pod.Annotations[annotationConfigMirror]
	return ok
}

func (k *kubelet) podWorker(ctx context.Context) {
	for {
		key, shutdown := k.queue.Get()
		if shutdown {
			return
		}
		err := k.syncPod(ctx, key)
		switch {
		case err == nil:
			k.queue.Forget(key)
		case ctx.Err() != nil:
		default:
			k.log.Error(err, "Pod sync failed; will retry", "pod", key)
			k.queue.AddRateLimited(key)
		}
		k.queue.Done(key)
	}
}

func (k *kubelet) syncPod(ctx context.Context, key string) error {
	obj, exists, err := k.pods.GetByKey(key)
	if err != nil || !exists {
		return err
	}
	pod := obj.(*corev1.Pod)
	if pod.DeletionTimestamp != nil {
		if pp := k.procs.get(pod.UID); pp != nil {
			select {
			case <-pp.stopped:
				k.procs.forget(pod.UID)
			default:
				// Stopping takes up to the grace period: the pod is
				// confirmed deleted when its processes are gone.
				stopped := k.procs.stop(pod.UID, pod.DeletionGracePeriodSeconds)
				go func() { <-stopped; k.queue.Add(key) }()
				return nil
			}
		}
		return k.confirmDeletion(ctx, pod)
	}
	if isMirrorPod(pod) {
		if pod.Namespace != MirrorPodNamespace || k.staticPodFor(pod.Name) == nil {
			// A mirror pod of a static pod this machine no longer runs.
			k.log.Info("Deleting orphaned mirror pod", "pod", key)
			return k.deletePod(ctx, pod, nil)
		}
		return nil // the status loop keeps it
	}
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return nil // someone declared it finished; a kubelet never restarts a terminal pod
	}
	podIP := k.o.Address
	if !pod.Spec.HostNetwork {
		ip, err := k.ips.allocate(pod.UID)
		if err != nil {
			return fmt.Errorf("pod %s: %w", key, err)
		}
		podIP = ip.String()
	}
	if k.o.RootDir != "" && usesCapstanImage(pod) {
		// Checked before the first start only: a running manager keeps
		// running when, say, its ReplicaSet is deleted with orphans and its
		// owner reference goes; what reaches the process cannot change.
		if k.procs.get(pod.UID) == nil {
			if refusal := deploy.CheckLocalManagerPod(pod, k.o.LocalDir); refusal != nil {
				k.log.Info("Refusing to run a pod of Capstan's image as a process of this host", "pod", key, "reason", refusal.Error())
				return k.writePodStatus(ctx, pod, refusedPodStatus(pod, podIP, k.o.Address, metav1.Now(), refusal))
			}
		}
		pp, err := k.procs.ensure(pod)
		if err != nil {
			return err
		}
		return k.writePodStatus(ctx, pod, processPodStatus(pod, podIP, k.o.Address, metav1.Now(), pp.snapshot()))
	}
	return k.writePodStatus(ctx, pod, desiredPodStatus(pod, podIP, k.o.Address, metav1.Now(), true))
}

// confirmDeletion finishes a graceful deletion: imaginary containers have
// already stopped, real processes were stopped before. The UID precondition keeps a
// same-named successor pod safe.
func (k *kubelet) confirmDeletion(ctx context.Context, pod *corev1.Pod) error {
	return k.deletePod(ctx, pod, ptr.To[int64](0))
}

func (k *kubelet) deletePod(ctx context.Context, pod *corev1.Pod, grace *int64) error {
	err := k.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: grace,
		Preconditions:      &metav1.Preconditions{UID: &pod.UID},
	})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // gone already, or replaced by a pod with another UID
	}
	if err != nil {
		return fmt.Errorf("deleting pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

// writePodStatus patches the pod's status unless it already is desired.
func (k *kubelet) writePodStatus(ctx context.Context, pod *corev1.Pod, desired corev1.PodStatus) error {
	if podStatusCurrent(pod.Status, desired) {
		return nil
	}
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": pod.UID},
		"status": map[string]any{
			"phase":                 desired.Phase,
			"hostIP":                desired.HostIP,
			"hostIPs":               desired.HostIPs,
			"podIP":                 desired.PodIP,
			"podIPs":                desired.PodIPs,
			"startTime":             desired.StartTime,
			"conditions":            desired.Conditions,
			"containerStatuses":     desired.ContainerStatuses,
			"initContainerStatuses": desired.InitContainerStatuses,
		},
	})
	if err != nil {
		return err
	}
	_, err = k.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("updating status of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

// podConditionTypes are the conditions a kubelet sets on a running pod.
var podConditionTypes = []corev1.PodConditionType{
	corev1.PodReadyToStartContainers,
	corev1.PodInitialized,
	corev1.PodReady,
	corev1.ContainersReady,
	corev1.PodScheduled,
}

// desiredPodStatus is the status of the pod running on this node with the
// given addresses; ready says whether its containers are ready. Times are
// kept from the current status wherever the state they date did not
// change, so an unchanged pod yields its current status.
func desiredPodStatus(pod *corev1.Pod, podIP, hostIP string, now metav1.Time, ready bool) corev1.PodStatus {
	cur := pod.Status
	start := cur.StartTime
	if start == nil {
		start = &now
	}
	readyStatus := corev1.ConditionTrue
	if !ready {
		readyStatus = corev1.ConditionFalse
	}
	var conditions []corev1.PodCondition
	for _, t := range podConditionTypes {
		c := corev1.PodCondition{Type: t, Status: corev1.ConditionTrue}
		if !ready && (t == corev1.PodReady || t == corev1.ContainersReady) {
			c.Status = readyStatus
			c.Reason = "ContainersNotReady"
			c.Message = fmt.Sprintf("containers with unready status: %v", containerNames(pod.Spec.Containers))
		}
		c.LastTransitionTime = now
		if old := findPodCondition(cur.Conditions, t); old != nil && old.Status == c.Status && !old.LastTransitionTime.IsZero() {
			c.LastTransitionTime = old.LastTransitionTime
		}
		conditions = append(conditions, c)
	}

	var initStatuses []corev1.ContainerStatus
	for _, c := range pod.Spec.InitContainers {
		old := findContainerStatus(cur.InitContainerStatuses, c.Name)
		s := baseContainerStatus(pod, c, old)
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			// A sidecar: it keeps running beside the main containers.
			s.State = runningState(old, *start)
			s.Ready, s.Started = ready, ptr.To(true)
		} else {
			finished := *start
			if old != nil && old.State.Terminated != nil {
				finished = old.State.Terminated.FinishedAt
			}
			s.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: 0, Reason: "Completed", StartedAt: *start, FinishedAt: finished, ContainerID: s.ContainerID,
			}}
			s.Ready, s.Started = true, ptr.To(false)
		}
		initStatuses = append(initStatuses, s)
	}
	var statuses []corev1.ContainerStatus
	for _, c := range pod.Spec.Containers {
		old := findContainerStatus(cur.ContainerStatuses, c.Name)
		s := baseContainerStatus(pod, c, old)
		s.State = runningState(old, *start)
		s.Ready, s.Started = ready, ptr.To(true)
		statuses = append(statuses, s)
	}

	return corev1.PodStatus{
		Phase:                 corev1.PodRunning,
		Conditions:            conditions,
		HostIP:                hostIP,
		HostIPs:               []corev1.HostIP{{IP: hostIP}},
		PodIP:                 podIP,
		PodIPs:                []corev1.PodIP{{IP: podIP}},
		StartTime:             start,
		InitContainerStatuses: initStatuses,
		ContainerStatuses:     statuses,
		QOSClass:              cur.QOSClass,
	}
}

func baseContainerStatus(pod *corev1.Pod, c corev1.Container, old *corev1.ContainerStatus) corev1.ContainerStatus {
	s := corev1.ContainerStatus{
		Name:        c.Name,
		Image:       c.Image,
		ImageID:     imageID(c.Image),
		ContainerID: "capstan://" + digest(string(pod.UID), c.Name)[:32],
	}
	if old != nil {
		s.RestartCount = old.RestartCount
	}
	return s
}

func runningState(old *corev1.ContainerStatus, start metav1.Time) corev1.ContainerState {
	if old != nil && old.State.Running != nil {
		return corev1.ContainerState{Running: old.State.Running.DeepCopy()}
	}
	return corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: start}}
}

// imageID is what a runtime reports for the pulled image: the reference
// with a digest. Nothing is pulled, so the digest is made from the name.
func imageID(image string) string {
	return image + "@sha256:" + digest(image)
}

func digest(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

func containerNames(containers []corev1.Container) []string {
	names := make([]string, 0, len(containers))
	for _, c := range containers {
		names = append(names, c.Name)
	}
	return names
}

func findPodCondition(conditions []corev1.PodCondition, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range conditions {
		if conditions[i].Type == t {
			return &conditions[i]
		}
	}
	return nil
}

func findContainerStatus(statuses []corev1.ContainerStatus, name string) *corev1.ContainerStatus {
	for i := range statuses {
		if statuses[i].Name == name {
			return &statuses[i]
		}
	}
	return nil
}

// podStatusCurrent reports whether current already says what desired says.
// Conditions set by others (for example DisruptionTarget) are left out.
func podStatusCurrent(current, desired corev1.PodStatus) bool {
	if current.Phase != desired.Phase || current.HostIP != desired.HostIP || current.PodIP != desired.PodIP ||
		current.StartTime == nil || !current.StartTime.Equal(desired.StartTime) {
		return false
	}
	for _, want := range desired.Conditions {
		have := findPodCondition(current.Conditions, want.Type)
		if have == nil || !apiequality.Semantic.DeepEqual(*have, want) {
			return false
		}
	}
	return apiequality.Semantic.DeepEqual(current.HostIPs, desired.HostIPs) &&
		apiequality.Semantic.DeepEqual(current.PodIPs, desired.PodIPs) &&
		apiequality.Semantic.DeepEqual(current.ContainerStatuses, desired.ContainerStatuses) &&
		apiequality.Semantic.DeepEqual(current.InitContainerStatuses, desired.InitContainerStatuses)
}

// nodePodCIDR is the node's pod network: a /24 of 10.244.0.0/16 chosen by
// a hash of the node name, so it is the same every time the machine starts.
// Two nodes may share a /24 (the addresses route nowhere); within a node
// every pod has its own address.
func nodePodCIDR(nodeName string) (string, netip.Addr) {
	h := fnv.New32a()
	_, _ = h.Write([]byte(nodeName))
	base := netip.AddrFrom4([4]byte{10, 244, byte(h.Sum32() % 256), 0})
	return base.String() + "/24", base
}

// podHosts is how many pod addresses a node's /24 holds: .2 to .254 (.0 is
// the network, .1 the gateway, .255 broadcast).
const podHosts = 253

// ipAllocator hands out the node's pod addresses, one per pod UID.
type ipAllocator struct {
	mu    sync.Mutex
	base  [4]byte
	byPod map[types.UID]netip.Addr
	owner map[netip.Addr]types.UID
}

func newIPAllocator(base netip.Addr) *ipAllocator {
	return &ipAllocator{base: base.As4(), byPod: map[types.UID]netip.Addr{}, owner: map[netip.Addr]types.UID{}}
}

func (a *ipAllocator) host(n int) netip.Addr {
	b := a.base
	b[3] = byte(2 + n)
	return netip.AddrFrom4(b)
}

// allocate returns the pod's address, choosing one on first use: the pod
// UID's hash picks where to start looking, so addresses are spread and a
// pod keeps its address for its life.
func (a *ipAllocator) allocate(uid types.UID) (netip.Addr, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if ip, ok := a.byPod[uid]; ok {
		return ip, nil
	}
	sum := sha256.Sum256([]byte(uid))
	start := int(binary.BigEndian.Uint32(sum[:4]) % podHosts)
	for i := 0; i < podHosts; i++ {
		ip := a.host((start + i) % podHosts)
		if _, taken := a.owner[ip]; !taken {
			a.byPod[uid], a.owner[ip] = ip, uid
			return ip, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("no free pod address in %s/24: all %d are in use", netip.AddrFrom4(a.base), podHosts)
}

// reserve records an address a pod already has, if it is one of this
// node's and not taken by another pod.
func (a *ipAllocator) reserve(uid types.UID, ip netip.Addr) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !ip.Is4() {
		return
	}
	b := ip.As4()
	if b[0] != a.base[0] || b[1] != a.base[1] || b[2] != a.base[2] || b[3] < 2 || b[3] > 254 {
		return
	}
	if _, ok := a.byPod[uid]; ok {
		return
	}
	if _, taken := a.owner[ip]; taken {
		return
	}
	a.byPod[uid], a.owner[ip] = ip, uid
}

func (a *ipAllocator) release(uid types.UID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if ip, ok := a.byPod[uid]; ok {
		delete(a.byPod, uid)
		delete(a.owner, ip)
	}
}
