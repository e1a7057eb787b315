package machineset_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/controllers/machineset"
	fx "capstan.dev/capstan/test/fixture"
	"capstan.dev/capstan/test/provider"
)

// exists tells whether obj is in the API server.
func exists(t *testing.T, obj *unstructured.Unstructured) bool {
	t.Helper()
	err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}

// TestMissingClonesAreCreated plays a manager stopped between creating a
// Machine and its objects: the set creates what its own Machines miss, owned
// by the Machine, but nothing for a Machine whose infrastructure was already
// provisioned, nor for a Machine someone else created.
func TestMissingClonesAreCreated(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, false)
	ms := f.machineSet("repair", 3)
	ms.Annotations = map[string]string{clusterv1.PausedAnnotation: ""}
	fx.Create(t, env.Client, ms)
	get(t, ms)

	machine := func(name string) *clusterv1.Machine {
		return &clusterv1.Machine{
			ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name,
				Labels: map[string]string{clusterv1.MachineSetNameLabel: "repair", clusterv1.ClusterNameLabel: "c", "pool": "a"},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: clusterv1.MachineSetKind,
					Name: ms.Name, UID: ms.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}},
			Spec: clusterv1.MachineSpec{
				ClusterName:       "c",
				Version:           "v1.33.0",
				InfrastructureRef: provider.InfraMachine.Ref(name),
				Bootstrap:         clusterv1.Bootstrap{ConfigRef: provider.BootstrapConfig.Ref(name)},
			},
		}
	}
	// Created by the set, which stopped before cloning.
	crashed := machine("repair-crashed")
	// Created by the set and provisioned; its infrastructure object has
	// since gone (deleted by hand, say).
	provisioned := machine("repair-provisioned")
	provisioned.Spec.Bootstrap = clusterv1.Bootstrap{DataSecretName: ptr.To("data")}
	for _, m := range []*clusterv1.Machine{crashed, provisioned} {
		if err := env.Client.Create(ctx, m, client.FieldOwner(machineset.FieldManager)); err != nil {
			t.Fatal(err)
		}
	}
	provisioned.Status.Initialization.InfrastructureProvisioned = ptr.To(true)
	if err := env.Client.Status().Update(ctx, provisioned); err != nil {
		t.Fatal(err)
	}
	// Made by someone else, who creates its objects after it.
	foreign := machine("repair-foreign")
	fx.Create(t, env.Client, foreign)

	update(t, ms, func(ms *clusterv1.MachineSet) { delete(ms.Annotations, clusterv1.PausedAnnotation) })

	get(t, crashed)
	for _, obj := range []*unstructured.Unstructured{provider.BootstrapConfig.New(f.ns, crashed.Name, nil), provider.InfraMachine.New(f.ns, crashed.Name, nil)} {
		fx.Eventually(t, obj.GetKind()+" of the crashed Machine", 30*time.Second, func(context.Context) string {
			if !exists(t, obj) {
				return "not created"
			}
			return ""
		})
		ownedByMachineAtCreation(t, obj, crashed)
		if obj.GetLabels()[clusterv1.ClusterNameLabel] != "c" || obj.GetLabels()[clusterv1.MachineSetNameLabel] != "repair" ||
			obj.GetAnnotations()[clusterv1.TemplateClonedFromNameAnnotation] == "" {
			t.Errorf("%s labels %v annotations %v", obj.GetKind(), obj.GetLabels(), obj.GetAnnotations())
		}
	}
	if infra := provider.InfraMachine.New(f.ns, crashed.Name, nil); exists(t, infra) && infra.GetLabels()["from-infra-template"] != "yes" {
		t.Errorf("the repaired TestMachine is not the template's clone: labels %v", infra.GetLabels())
	}

	fx.Consistently(t, "nothing made for the provisioned and the foreign Machine", 2*time.Second, func(context.Context) string {
		for _, obj := range []*unstructured.Unstructured{
			provider.InfraMachine.New(f.ns, provisioned.Name, nil),
			provider.InfraMachine.New(f.ns, foreign.Name, nil),
			provider.BootstrapConfig.New(f.ns, foreign.Name, nil),
		} {
			if exists(t, obj) {
				return fmt.Sprintf("%s %s was created", obj.GetKind(), obj.GetName())
			}
		}
		return ""
	})
	if n := len(machines(t, f.ns)); n != 3 {
		t.Errorf("%d Machines, want the 3 there were", n)
	}
}

// TestFailedCloneIsRetried: when an object of a new Machine cannot be
// created, the Machine stays, the failure is reported, and the object is
// created once the cause is fixed.
func TestFailedCloneIsRetried(t *testing.T) {
	f := newFixture(t, false)
	// A label value the API server refuses makes the clone fail, not the
	// Machine (the Machine's labels come from the set).
	bad := provider.InfraMachineTemplate.New(f.ns, "bad", map[string]any{"template": map[string]any{
		"metadata": map[string]any{"labels": map[string]any{"broken": "not a label value!"}},
		"spec":     map[string]any{},
	}})
	fx.Create(t, env.Client, bad)
	ms := f.machineSet("retry", 1)
	ms.Spec.Template.Spec.InfrastructureRef = provider.InfraMachineTemplate.Ref("bad")
	fx.Create(t, env.Client, ms)

	got := waitMachines(t, f.ns, 1)
	m := got[0]
	waitSet(t, ms, "ScalingUp reports the failed object", func(ms *clusterv1.MachineSet) string {
		c := msCondition(ms, clusterv1.ScalingUpCondition)
		if c == nil || !strings.Contains(c.Message, "TestMachine "+m.Name) {
			return fmt.Sprintf("ScalingUp %+v", c)
		}
		return ""
	})
	if n := eventCount(t, f.ns, "FailedCreate"); n == 0 {
		t.Error("no FailedCreate event")
	}
	// The bootstrap object was made before the failure and stays.
	boot := provider.BootstrapConfig.New(f.ns, m.Name, nil)
	if !exists(t, boot) {
		t.Error("the Machine's TestBootstrapConfig is missing")
	}

	update(t, bad, func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedStringMap(u.Object, map[string]string{"fixed": "yes"}, "spec", "template", "metadata", "labels")
	})
	// The failure's backoff may be long by now; any change of the set wakes it.
	update(t, ms, func(ms *clusterv1.MachineSet) { ms.Annotations = map[string]string{"poke": "1"} })
	infra := provider.InfraMachine.New(f.ns, m.Name, nil)
	fx.Eventually(t, "the TestMachine created after the fix", 30*time.Second, func(context.Context) string {
		if !exists(t, infra) {
			return "not yet"
		}
		return ""
	})
	ownedByMachineAtCreation(t, infra, m)
	if infra.GetLabels()["fixed"] != "yes" {
		t.Errorf("labels %v", infra.GetLabels())
	}
	waitSet(t, ms, "ScalingUp no longer reports it", func(ms *clusterv1.MachineSet) string {
		if c := msCondition(ms, clusterv1.ScalingUpCondition); c == nil || c.Message != "" {
			return fmt.Sprintf("ScalingUp %+v", c)
		}
		return ""
	})
	if all := machines(t, f.ns); len(all) != 1 || all[0].UID != m.UID {
		t.Errorf("Machines %v, want only %s", names(all), m.Name)
	}
}
