package kubelet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"runtime"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	kubeletapis "k8s.io/kubelet/pkg/apis"

	controlplanev1 "capstan.dev/capstan/api/controlplane/kubeadm/v1beta2"
)

// The machine's advertised resources. They are fixed: a local machine has
// no real capacity to report, and schedulers only need something plausible.
var nodeResources = corev1.ResourceList{
	corev1.ResourceCPU:              resource.MustParse("4"),
	corev1.ResourceMemory:           resource.MustParse("8Gi"),
	corev1.ResourcePods:             resource.MustParse("110"),
	corev1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
}

const (
	osImage        = "Capstan local machine"
	kubeletPort    = 10250
	runtimeVersion = "capstan://1.0.0"
)

// permanentError ends registration retries: retrying cannot fix it.
type permanentError struct{ error }

// register creates the Node, or adopts an existing one, retrying transient
// failures (the API server may not be up yet) until ctx ends.
func (k *kubelet) register(ctx context.Context) error {
	delay := 500 * time.Millisecond
	for {
		err := k.tryRegister(ctx)
		if err == nil {
			return nil
		}
		var perm permanentError
		if errors.As(err, &perm) {
			return perm.error
		}
		if ctx.Err() != nil {
			// Stopped, not failed: the machine is shutting down.
			return nil
		}
		k.log.Error(err, "Registering the Node failed; retrying", "after", delay)
		if !sleep(ctx, delay) {
			return nil
		}
		delay = min(2*delay, 10*time.Second)
	}
}

// registrationAnnotations are the annotations the kubelet keeps on its Node:
// attach/detach left to the controller manager, as a kubelet registers, and,
// on a machine that can leave the load balancer, the mark that tells
// KubeadmControlPlane to ask it to before its etcd member goes.
func (k *kubelet) registrationAnnotations() map[string]string {
	a := map[string]string{"volumes.kubernetes.io/controller-managed-attach-detach": "true"}
	if k.o.OnLeave != nil {
		a[controlplanev1.LoadBalancerLeaverAnnotation] = "true"
	}
	return a
}

func (k *kubelet) tryRegister(ctx context.Context) error {
	own, restricted := splitLabels(k.o.Labels)
	for key, value := range defaultLabels(k.o.NodeName) {
		own[key] = value
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:   k.o.NodeName,
			Labels: own,
			// As a kubelet registering with attach/detach left to the
			// controller manager.
			Annotations: k.registrationAnnotations(),
		},
		Spec: corev1.NodeSpec{
			ProviderID: k.o.ProviderID,
			Taints:     k.o.Taints,
		},
	}
	node.Status = desiredNodeStatus(k.o, metav1.Now(), nil)
	created, err := k.client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err == nil {
		k.nodeUID = created.UID
		k.setPendingLabels(restricted)
		k.log.Info("Registered the Node", "providerID", k.o.ProviderID)
		return nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating Node %s: %w", k.o.NodeName, err)
	}

	existing, err := k.client.CoreV1().Nodes().Get(ctx, k.o.NodeName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading existing Node %s: %w", k.o.NodeName, err)
	}
	if existing.Spec.ProviderID != "" && k.o.ProviderID != "" && existing.Spec.ProviderID != k.o.ProviderID {
		return permanentError{fmt.Errorf("kubelet: Node %s already exists with spec.providerID %q, not this machine's %q: another machine registered the name; delete that Node or give this machine another node name",
			k.o.NodeName, existing.Spec.ProviderID, k.o.ProviderID)}
	}
	// Adopting: the providerID may be filled in once; the kubelet's own
	// labels are kept current, as a kubelet does on restart; other labels
	// and taints belong to whoever manages the Node now.
	patch := map[string]any{}
	labels := map[string]any{}
	for key, value := range defaultLabels(k.o.NodeName) {
		if existing.Labels[key] != value {
			labels[key] = value
		}
	}
	annotations := map[string]any{}
	for key, value := range k.registrationAnnotations() {
		if existing.Annotations[key] != value {
			annotations[key] = value
		}
	}
	meta := map[string]any{}
	if len(labels) > 0 {
		meta["labels"] = labels
	}
	if len(annotations) > 0 {
		meta["annotations"] = annotations
	}
	if len(meta) > 0 {
		patch["metadata"] = meta
	}
	if existing.Spec.ProviderID == "" && k.o.ProviderID != "" {
		patch["spec"] = map[string]any{"providerID": k.o.ProviderID}
	}
	if len(patch) > 0 {
		if _, err := k.patchNode(ctx, k.client, patch, ""); err != nil {
			return fmt.Errorf("adopting Node %s: %w", k.o.NodeName, err)
		}
	}
	k.nodeUID = existing.UID
	missing := map[string]string{}
	for key, value := range restricted {
		if existing.Labels[key] != value {
			missing[key] = value
		}
	}
	k.setPendingLabels(missing)
	k.log.Info("Adopted the existing Node", "providerID", k.o.ProviderID)
	return nil
}

// defaultLabels are the labels every kubelet puts on its Node.
func defaultLabels(nodeName string) map[string]string {
	return map[string]string{
		corev1.LabelHostname:   nodeName,
		corev1.LabelOSStable:   runtime.GOOS,
		corev1.LabelArchStable: runtime.GOARCH,
	}
}

// splitLabels separates the labels a node may set on itself from those the
// NodeRestriction admission plugin forbids it: labels in the kubernetes.io
// and k8s.io namespaces other than the kubelet's own (node-role.kubernetes.io
// among them), and any node-restriction.kubernetes.io label.
func splitLabels(labels map[string]string) (own, restricted map[string]string) {
	own, restricted = map[string]string{}, map[string]string{}
	for key, value := range labels {
		if labelRestricted(key) {
			restricted[key] = value
		} else {
			own[key] = value
		}
	}
	return own, restricted
}

func labelRestricted(key string) bool {
	prefix, _, found := strings.Cut(key, "/")
	if !found {
		return false
	}
	if prefix == corev1.LabelNamespaceNodeRestriction || strings.HasSuffix(prefix, "."+corev1.LabelNamespaceNodeRestriction) {
		return true
	}
	kubernetesNamespace := prefix == "kubernetes.io" || strings.HasSuffix(prefix, ".kubernetes.io") ||
		prefix == "k8s.io" || strings.HasSuffix(prefix, ".k8s.io")
	return kubernetesNamespace && !kubeletapis.IsKubeletLabel(key)
}

func (k *kubelet) setPendingLabels(labels map[string]string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(labels) == 0 {
		k.pendingLabels = nil
		return
	}
	k.pendingLabels = labels
}

// applyPendingLabels sets the restricted labels with LabelsClient. Failures
// are retried at the next status sync.
func (k *kubelet) applyPendingLabels(ctx context.Context) {
	k.mu.Lock()
	labels := k.pendingLabels
	k.mu.Unlock()
	if len(labels) == 0 {
		return
	}
	values := map[string]any{}
	for key, value := range labels {
		values[key] = value
	}
	_, err := k.patchNode(ctx, k.labels, map[string]any{"metadata": map[string]any{"labels": values}}, "")
	if err != nil && apierrors.IsForbidden(err) && k.o.LabelsClient == nil {
		// The API server's label policy refuses them to the node, and will
		// keep refusing: say so once instead of every heartbeat.
		k.log.Error(err, "The API server does not let a node set these labels on itself; they are left out (give kubelet Options.LabelsClient credentials allowed to label Nodes)", "labels", keys(labels))
		k.setPendingLabels(nil)
		return
	}
	if err != nil {
		k.log.Error(err, "Setting labels a node may not set on itself failed; will retry", "labels", keys(labels))
		return
	}
	k.log.Info("Set restricted Node labels", "labels", keys(labels))
	k.setPendingLabels(nil)
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for key := range m {
		out = append(out, key)
	}
	return out
}

// patchNode sends a strategic merge patch to the Node (or its subresource).
func (k *kubelet) patchNode(ctx context.Context, client kubernetes.Interface, patch map[string]any, subresource string) (*corev1.Node, error) {
	data, err := json.Marshal(patch)
	if err != nil {
		return nil, err
	}
	var sub []string
	if subresource != "" {
		sub = []string{subresource}
	}
	return client.CoreV1().Nodes().Patch(ctx, k.o.NodeName, types.StrategicMergePatchType, data, metav1.PatchOptions{}, sub...)
}

// desiredNodeStatus is the status the node reports at now. Conditions keep
// their transition time from prev when their status did not change.
func desiredNodeStatus(o Options, now metav1.Time, prev *corev1.NodeStatus) corev1.NodeStatus {
	conditions := []corev1.NodeCondition{
		{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory", Message: "kubelet has sufficient memory available"},
		{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasNoDiskPressure", Message: "kubelet has no disk pressure"},
		{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientPID", Message: "kubelet has sufficient PID available"},
		{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "kubelet is posting ready status"},
	}
	for i := range conditions {
		c := &conditions[i]
		c.LastHeartbeatTime = now
		c.LastTransitionTime = now
		if prev != nil {
			if old := findNodeCondition(prev.Conditions, c.Type); old != nil && old.Status == c.Status && !old.LastTransitionTime.IsZero() {
				c.LastTransitionTime = old.LastTransitionTime
			}
		}
	}
	id := machineID(o.NodeName)
	port := int32(kubeletPort)
	if o.servingPort != 0 {
		port = o.servingPort
	}
	return corev1.NodeStatus{
		Capacity:    nodeResources.DeepCopy(),
		Allocatable: nodeResources.DeepCopy(),
		Conditions:  conditions,
		Addresses: []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: o.Address},
			{Type: corev1.NodeHostName, Address: o.NodeName},
		},
		DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: port}},
		NodeInfo: corev1.NodeSystemInfo{
			MachineID:               id,
			SystemUUID:              id,
			BootID:                  id,
			KernelVersion:           "capstan",
			OSImage:                 osImage,
			ContainerRuntimeVersion: runtimeVersion,
			KubeletVersion:          o.KubeletVersion,
			KubeProxyVersion:        "",
			OperatingSystem:         runtime.GOOS,
			Architecture:            runtime.GOARCH,
		},
	}
}

// machineID is a stable identifier derived from the node name: the same
// machine keeps it across restarts.
func machineID(nodeName string) string {
	h := fnv.New128a()
	_, _ = h.Write([]byte(nodeName))
	return fmt.Sprintf("%x", h.Sum(nil))
}

func findNodeCondition(conditions []corev1.NodeCondition, t corev1.NodeConditionType) *corev1.NodeCondition {
	for i := range conditions {
		if conditions[i].Type == t {
			return &conditions[i]
		}
	}
	return nil
}

// nodeStatusCurrent reports whether current already says everything desired
// says, heartbeat times aside. Conditions written by others (for example
// NetworkUnavailable) are left out of the comparison.
func nodeStatusCurrent(current, desired corev1.NodeStatus) bool {
	for _, want := range desired.Conditions {
		have := findNodeCondition(current.Conditions, want.Type)
		if have == nil || have.Status != want.Status || have.Reason != want.Reason || have.Message != want.Message {
			return false
		}
	}
	return apiequality.Semantic.DeepEqual(current.Addresses, desired.Addresses) &&
		apiequality.Semantic.DeepEqual(current.Capacity, desired.Capacity) &&
		apiequality.Semantic.DeepEqual(current.Allocatable, desired.Allocatable) &&
		current.NodeInfo == desired.NodeInfo &&
		current.DaemonEndpoints == desired.DaemonEndpoints
}

// heartbeatDue reports whether the Ready condition's heartbeat is older
// than every.
func heartbeatDue(current corev1.NodeStatus, now time.Time, every time.Duration) bool {
	ready := findNodeCondition(current.Conditions, corev1.NodeReady)
	return ready == nil || now.Sub(ready.LastHeartbeatTime.Time) >= every
}

// syncNodeStatus writes the Node's status when it differs from what the node
// reports or its heartbeat is due; otherwise it writes nothing.
func (k *kubelet) syncNodeStatus(ctx context.Context) error {
	node, err := k.node()
	if apierrors.IsNotFound(err) {
		// The Node was deleted (the machine is being removed): a kubelet
		// does not re-register it behind its owner's back.
		return nil
	}
	if err != nil {
		return err
	}
	now := metav1.Now()
	desired := desiredNodeStatus(k.o, now, &node.Status)
	if nodeStatusCurrent(node.Status, desired) && !heartbeatDue(node.Status, now.Time, statusEvery*k.o.HeartbeatInterval) {
		return nil
	}
	_, err = k.patchNode(ctx, k.client, map[string]any{
		"metadata": map[string]any{"uid": node.UID},
		"status": map[string]any{
			"conditions":      desired.Conditions,
			"addresses":       desired.Addresses,
			"capacity":        desired.Capacity,
			"allocatable":     desired.Allocatable,
			"nodeInfo":        desired.NodeInfo,
			"daemonEndpoints": desired.DaemonEndpoints,
		},
	}, "status")
	if err != nil {
		return fmt.Errorf("updating Node %s status: %w", k.o.NodeName, err)
	}
	return nil
}

// statusLoop runs every heartbeat interval and when the Node or a mirror pod
// changes: it checks the static pods' health, keeps their mirror pods, and
// keeps the Node's status and restricted labels.
func (k *kubelet) statusLoop(ctx context.Context) {
	ticker := time.NewTicker(k.o.HeartbeatInterval)
	defer ticker.Stop()
	tick := true
	for {
		if tick {
			k.health.check(ctx, k.log, k.o.StaticPods, k.o.HeartbeatInterval)
		}
		k.applyPendingLabels(ctx)
		if err := k.syncNodeStatus(ctx); err != nil && ctx.Err() == nil {
			k.log.Error(err, "Node status sync failed; will retry")
		}
		if err := k.syncMirrorPods(ctx); err != nil && ctx.Err() == nil {
			k.log.Error(err, "Mirror pod sync failed; will retry")
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			tick = true
		case <-k.statusCh:
			tick = false
		}
	}
}
