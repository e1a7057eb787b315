// Package deploytest makes, for tests, the objects an installation's
// controllers would make from it.
package deploytest

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"capstan.dev/capstan/internal/deploy"
)

// ManagerPod is the Pod the manager Deployment of `capstan init
// --infrastructure local` (on localDir) gets from its ReplicaSet, bound to
// node.
func ManagerPod(t testing.TB, localDir, name, node string) *corev1.Pod {
	t.Helper()
	objs, err := deploy.Objects(deploy.Options{Image: deploy.Image("test"), LocalDir: localDir})
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range objs {
		d, ok := obj.(*appsv1.Deployment)
		if !ok || d.Name != deploy.ManagerName {
			continue
		}
		const hash = "5d4c8b9f7"
		pod := &corev1.Pod{ObjectMeta: *d.Spec.Template.ObjectMeta.DeepCopy(), Spec: *d.Spec.Template.Spec.DeepCopy()}
		pod.Namespace, pod.Name = d.Namespace, name
		if pod.Labels == nil {
			pod.Labels = map[string]string{}
		}
		pod.Labels[appsv1.DefaultDeploymentUniqueLabelKey] = hash
		pod.OwnerReferences = []metav1.OwnerReference{{
			APIVersion: "apps/v1", Kind: "ReplicaSet", Name: d.Name + "-" + hash, UID: "6b1f0c2e-0000-4000-8000-000000000001",
			Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
		}}
		pod.Spec.NodeName = node
		return pod
	}
	t.Fatal("deploy.Objects has no manager Deployment")
	return nil
}
