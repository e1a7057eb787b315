package machine_test

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/contract"
	"capstan.dev/capstan/internal/controllers/machineset"
	"capstan.dev/capstan/test/fixture"
	"capstan.dev/capstan/test/provider"
)

// TestObjectsOwnedAtCreationAreNotWritten: a MachineSet creates its
// Machine's bootstrap and infrastructure objects with the Machine already
// their controller, so the Machine controller, once it has read them, has
// nothing to write to them (it used to patch each one to take it over).
func TestObjectsOwnedAtCreationAreNotWritten(t *testing.T) {
	ctx := context.Background()
	ns := mgmt.Namespace(t)
	cluster := workloadCluster(t, ns)
	ms := &clusterv1.MachineSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "workers"},
		Spec: clusterv1.MachineSetSpec{
			ClusterName: cluster.Name,
			Replicas:    ptr.To(int32(1)),
			Template: clusterv1.MachineTemplateSpec{Spec: clusterv1.MachineSpec{
				ClusterName:       cluster.Name,
				Version:           "v1.35.0",
				InfrastructureRef: provider.InfraMachineTemplate.Ref("infra"),
				Bootstrap:         clusterv1.Bootstrap{ConfigRef: provider.BootstrapConfigTemplate.Ref("boot")},
			}},
		},
	}
	for _, o := range []client.Object{
		provider.InfraMachineTemplate.New(ns, "infra", map[string]any{"template": map[string]any{"spec": map[string]any{"size": "s"}}}),
		provider.BootstrapConfigTemplate.New(ns, "boot", map[string]any{"template": map[string]any{"spec": map[string]any{}}}),
		ms,
	} {
		if err := mgmt.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}

	m := &clusterv1.Machine{}
	fixture.Eventually(t, "the Machine controller has read both objects", 30*time.Second, func(ctx context.Context) string {
		list := &clusterv1.MachineList{}
		if err := mgmt.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
			return err.Error()
		}
		if len(list.Items) != 1 {
			return fmt.Sprintf("%d Machines", len(list.Items))
		}
		*m = list.Items[0]
		for _, t := range []string{clusterv1.BootstrapConfigReadyCondition, clusterv1.InfrastructureReadyCondition} {
			c := meta.FindStatusCondition(m.Status.Conditions, t)
			if c == nil || c.Reason == clusterv1.ObjectDoesNotExistReason || c.Reason == clusterv1.InspectionFailedReason {
				return fmt.Sprintf("%s %+v", t, c)
			}
		}
		return ""
	})

	for _, obj := range []*unstructured.Unstructured{provider.BootstrapConfig.New(ns, m.Name, nil), provider.InfraMachine.New(ns, m.Name, nil)} {
		if err := mgmt.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			t.Fatal(err)
		}
		if refs := obj.GetOwnerReferences(); len(refs) != 1 || !reflect.DeepEqual(refs[0], contract.MachineOwner(m)) {
			t.Errorf("%s owners %+v, want only the Machine", obj.GetKind(), refs)
		}
		// Nothing but the set's create wrote the object itself: a takeover
		// patch by the Machine controller would show up as another manager.
		for _, e := range obj.GetManagedFields() {
			if e.Subresource == "" && e.Manager != machineset.FieldManager {
				fields := ""
				if e.FieldsV1 != nil {
					fields = string(e.FieldsV1.Raw)
				}
				t.Errorf("%s %s written by %s (%s): %s", obj.GetKind(), obj.GetName(), e.Manager, e.Operation, fields)
			}
		}
	}
}
