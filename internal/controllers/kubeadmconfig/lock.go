package kubeadmconfig

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	controlplanev1 "capstan.dev/capstan/api/controlplane/kubeadm/v1beta2"
	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/contract"
)

// The init lock is a ConfigMap <cluster>-lock in the Cluster's namespace
// naming the one Machine allowed to run "kubeadm init". Creating an object
// is atomic in the API server, so exactly one of several racing control
// plane Machines wins. The lock is dropped once the control plane is
// initialized, or taken over when its holder Machine no longer exists.
//
// Machines a KubeadmControlPlane controls take no lock: the control plane
// creates its first Machine alone and no other until the Cluster reports
// the control plane initialized (and none while one is being deleted), so
// there is no race to settle, and the lock would cost two writes per
// cluster. The lock is for control-plane Machines made without one.
const lockDataKey = "lock-information"

// controlledByControlPlane tells whether a KubeadmControlPlane controls m.
func controlledByControlPlane(m *clusterv1.Machine) bool {
	ref := metav1.GetControllerOf(m)
	return ref != nil && ref.Kind == "KubeadmControlPlane" && strings.HasPrefix(ref.APIVersion, controlplanev1.GroupVersion.Group+"/")
}

type lockInformation struct {
	MachineName string `json:"machineName"`
}

func lockKey(c *clusterv1.Cluster) client.ObjectKey {
	return client.ObjectKey{Namespace: c.Namespace, Name: c.Name + "-lock"}
}

// acquireLock takes the init lock for m, or tells who holds it ("" when
// that could not be read).
func (r *Reconciler) acquireLock(ctx context.Context, c *clusterv1.Cluster, m *clusterv1.Machine) (holder string, acquired bool, err error) {
	key := lockKey(c)
	// Two rounds: a stale lock removed in the first is retaken in the second.
	for range 2 {
		cm := &corev1.ConfigMap{}
		err := r.Client.Get(ctx, key, cm)
		switch {
		case err == nil:
			var info lockInformation
			_ = json.Unmarshal([]byte(cm.Data[lockDataKey]), &info)
			if info.MachineName == m.Name {
				return m.Name, true, nil
			}
			if info.MachineName != "" {
				err := r.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: info.MachineName}, &clusterv1.Machine{})
				if err == nil {
					return info.MachineName, false, nil
				}
				if !apierrors.IsNotFound(err) {
					return "", false, err
				}
			}
			// The holder is gone (or unreadable): free the lock, exactly the
			// version read, so a fresh lock taken meanwhile survives.
			if err := r.Client.Delete(ctx, cm, client.Preconditions{UID: &cm.UID, ResourceVersion: &cm.ResourceVersion}); err != nil &&
				!apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				return "", false, fmt.Errorf("removing stale init lock %s: %w", key, err)
			}
			continue
		case !apierrors.IsNotFound(err):
			return "", false, fmt.Errorf("reading init lock %s: %w", key, err)
		}
		raw, _ := json.Marshal(lockInformation{MachineName: m.Name})
		cm = &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: key.Namespace, Name: key.Name,
				Labels:          map[string]string{clusterv1.ClusterNameLabel: c.Name},
				OwnerReferences: []metav1.OwnerReference{contract.ClusterOwner(c)},
			},
			Data: map[string]string{lockDataKey: string(raw)},
		}
		if err := r.Client.Create(ctx, cm); err != nil {
			if apierrors.IsAlreadyExists(err) {
				continue
			}
			return "", false, fmt.Errorf("creating init lock %s: %w", key, err)
		}
		return m.Name, true, nil
	}
	return "", false, nil
}

// releaseLock drops the init lock if it exists.
func (r *Reconciler) releaseLock(ctx context.Context, c *clusterv1.Cluster) error {
	cm := &corev1.ConfigMap{}
	if err := r.Client.Get(ctx, lockKey(c), cm); err != nil {
		return client.IgnoreNotFound(err)
	}
	if err := r.Client.Delete(ctx, cm); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("removing init lock %s: %w", lockKey(c), err)
	}
	return nil
}
