package kubelet

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// mirrorPodName is the name kubeadm's static pods get in the cluster.
func mirrorPodName(component, nodeName string) string { return component + "-" + nodeName }

func (k *kubelet) staticPodFor(mirrorName string) *StaticPod {
	for i := range k.o.StaticPods {
		if mirrorPodName(k.o.StaticPods[i].Component, k.o.NodeName) == mirrorName {
			return &k.o.StaticPods[i]
		}
	}
	return nil
}

// staticPodHash identifies a static pod's definition; a mirror pod made from
// another definition is replaced, as a kubelet replaces the mirror pod when
// a manifest changes.
func staticPodHash(sp StaticPod, image string) string {
	parts := []string{sp.Component, image}
	for _, key := range slices.Sorted(maps.Keys(sp.Annotations)) {
		parts = append(parts, key, sp.Annotations[key])
	}
	return digest(parts...)[:32]
}

func staticPodImage(sp StaticPod, kubeletVersion string) string {
	if sp.Image != "" {
		return sp.Image
	}
	version := kubeletVersion
	if version == "" {
		version = "latest"
	}
	return "registry.k8s.io/" + sp.Component + ":" + version
}

// mirrorPod is the mirror Pod of sp on node.
func mirrorPod(sp StaticPod, node *corev1.Node, kubeletVersion string) *corev1.Pod {
	image := staticPodImage(sp, kubeletVersion)
	hash := staticPodHash(sp, image)
	annotations := map[string]string{}
	maps.Copy(annotations, sp.Annotations)
	annotations[annotationConfigMirror] = hash
	annotations[annotationConfigHash] = hash
	annotations[annotationConfigSource] = "file"
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:   MirrorPodNamespace,
			Name:        mirrorPodName(sp.Component, node.Name),
			Labels:      map[string]string{"component": sp.Component, "tier": "control-plane"},
			Annotations: annotations,
			// NodeRestriction requires exactly this owner: the node itself,
			// as controller, without blockOwnerDeletion.
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID, Controller: ptr.To(true),
			}},
		},
		Spec: corev1.PodSpec{
			NodeName:          node.Name,
			HostNetwork:       true,
			PriorityClassName: "system-node-critical",
			Containers: []corev1.Container{{
				Name:    sp.Component,
				Image:   image,
				Command: []string{sp.Component},
			}},
			Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}},
		},
	}
}

// syncMirrorPods makes every static pod's mirror pod exist, match its
// definition and show the component's health. It reads from the informer's
// cache and writes only what differs.
func (k *kubelet) syncMirrorPods(ctx context.Context) error {
	if len(k.o.StaticPods) == 0 {
		return nil
	}
	node, err := k.node()
	if apierrors.IsNotFound(err) {
		return nil // mirror pods must be owned by the Node
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, sp := range k.o.StaticPods {
		if err := k.syncMirrorPod(ctx, sp, node); err != nil {
			errs = append(errs, fmt.Errorf("mirror pod of %s: %w", sp.Component, err))
		}
	}
	return errors.Join(errs...)
}

func (k *kubelet) syncMirrorPod(ctx context.Context, sp StaticPod, node *corev1.Node) error {
	want := mirrorPod(sp, node, k.o.KubeletVersion)
	obj, exists, err := k.pods.GetByKey(want.Namespace + "/" + want.Name)
	if err != nil {
		return err
	}
	ready := k.health.ready(sp)
	if !exists {
		created, err := k.client.CoreV1().Pods(want.Namespace).Create(ctx, want, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil // the cache is behind; the next pass sees it
		}
		if err != nil {
			return err
		}
		k.log.Info("Created mirror pod", "pod", want.Namespace+"/"+want.Name)
		return k.writePodStatus(ctx, created, desiredPodStatus(created, k.o.Address, k.o.Address, metav1.Now(), ready))
	}
	have := obj.(*corev1.Pod)
	if have.DeletionTimestamp != nil {
		return nil // the pod worker confirms the deletion; re-created after
	}
	if !isMirrorPod(have) {
		k.log.Info("A pod that is not a mirror pod has a mirror pod's name; leaving it", "pod", want.Namespace+"/"+want.Name)
		return nil
	}
	if have.Annotations[annotationConfigHash] != want.Annotations[annotationConfigHash] || !ownedBy(have, node) {
		k.log.Info("Replacing outdated mirror pod", "pod", want.Namespace+"/"+want.Name)
		return k.deletePod(ctx, have, ptr.To[int64](0))
	}
	return k.writePodStatus(ctx, have, desiredPodStatus(have, k.o.Address, k.o.Address, metav1.Now(), ready))
}

func ownedBy(pod *corev1.Pod, node *corev1.Node) bool {
	for _, ref := range pod.OwnerReferences {
		if ref.Kind == "Node" && ref.Name == node.Name && ref.UID == node.UID {
			return true
		}
	}
	return false
}
