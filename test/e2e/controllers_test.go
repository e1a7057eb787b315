package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/test/fixture"
)

func gone(c client.Client, obj client.Object) func(ctx context.Context) string {
	return func(ctx context.Context) string {
		err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		return fixture.Unless(apierrors.IsNotFound(err), fmt.Sprintf("still there (%v)", err))
	}
}

// A namespace holding Capstan objects and built-in ones is emptied and
// removed; without the namespace controller it would stay Terminating.
func TestNamespaceDeletesCompletely(t *testing.T) {
	ctx := context.Background()
	c := env.Client
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "delete-me"}}
	if err := c.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	cluster := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: ns.Name},
		Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{
			APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "LocalCluster", Name: "c",
		}},
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", Namespace: ns.Name}}
	for _, o := range []client.Object{cluster, cm} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	// The service account controller gives every namespace its default account.
	fixture.Eventually(t, "default service account", 30*time.Second, func(ctx context.Context) string {
		err := c.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: "default"}, &corev1.ServiceAccount{})
		return fixture.Unless(err == nil, fmt.Sprint(err))
	})
	if err := c.Delete(ctx, ns); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, "namespace removed", time.Minute, gone(c, ns))
	for _, o := range []client.Object{cluster, cm} {
		if err := c.Get(ctx, client.ObjectKeyFromObject(o), o); !apierrors.IsNotFound(err) {
			t.Errorf("%T %s survived its namespace: %v", o, o.GetName(), err)
		}
	}
}

// Owner references cascade: deleting an owner removes its dependents, in the
// background and in the foreground.
func TestOwnerReferencesCascade(t *testing.T) {
	for _, policy := range []metav1.DeletionPropagation{metav1.DeletePropagationBackground, metav1.DeletePropagationForeground} {
		t.Run(string(policy), func(t *testing.T) {
			ctx := context.Background()
			c := env.Client
			ns := env.Namespace(t)
			owner := &clusterv1.Cluster{
				ObjectMeta: metav1.ObjectMeta{Name: "owner", Namespace: ns},
				Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{
					APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "LocalCluster", Name: "owner",
				}},
			}
			if err := c.Create(ctx, owner); err != nil {
				t.Fatal(err)
			}
			ref := metav1.OwnerReference{APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster", Name: owner.Name, UID: owner.UID}
			dependent := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "owner-kubeconfig", Namespace: ns, OwnerReferences: []metav1.OwnerReference{ref}}}
			machine := &clusterv1.Machine{
				ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: ns, OwnerReferences: []metav1.OwnerReference{ref}},
				Spec: clusterv1.MachineSpec{
					ClusterName: owner.Name,
					Bootstrap:   clusterv1.Bootstrap{DataSecretName: ptrTo("x")},
					InfrastructureRef: clusterv1.ContractVersionedObjectReference{
						APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "LocalMachine", Name: "m",
					},
				},
			}
			for _, o := range []client.Object{dependent, machine} {
				if err := c.Create(ctx, o); err != nil {
					t.Fatal(err)
				}
			}
			if err := c.Delete(ctx, owner, client.PropagationPolicy(policy)); err != nil {
				t.Fatal(err)
			}
			fixture.Eventually(t, "secret collected", time.Minute, gone(c, dependent))
			fixture.Eventually(t, "machine collected", time.Minute, gone(c, machine))
			fixture.Eventually(t, "owner removed", time.Minute, gone(c, owner))
		})
	}
}
