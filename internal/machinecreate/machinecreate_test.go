package machinecreate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/plan"
	"capstan.dev/capstan/internal/scheme"
)

const testManager = "test-owner"

// configMaps makes a Machine's object as a ConfigMap named after the
// Machine with a suffix, and records which Machines it made one for.
type configMaps struct {
	c      client.Client
	suffix string
	fail   string // the Machine it fails for
	made   *[]string
}

func (k configMaps) Reference(machineName string) clusterv1.ContractVersionedObjectReference {
	return clusterv1.ContractVersionedObjectReference{Kind: "ConfigMap", Name: machineName + k.suffix}
}

func (k configMaps) Make(ctx context.Context, m *clusterv1.Machine) (client.Object, error) {
	if m.Name == k.fail {
		return nil, errors.New("refused")
	}
	// The Machine must exist, and the object be made with it as owner.
	if err := k.c.Get(ctx, client.ObjectKeyFromObject(m), &clusterv1.Machine{}); err != nil {
		return nil, fmt.Errorf("the Machine is not there: %w", err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: m.Namespace, Name: m.Name + k.suffix}}
	if err := k.c.Create(ctx, cm); err != nil {
		return nil, err
	}
	*k.made = append(*k.made, cm.Name)
	return cm, nil
}

// configMapsFound finds the objects configMaps makes.
type configMapsFound struct{ c client.Client }

func (f configMapsFound) Exists(ctx context.Context, m *clusterv1.Machine, _ plan.MachineObjectSlot, ref clusterv1.ContractVersionedObjectReference) (bool, error) {
	err := f.c.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: ref.Name}, &corev1.ConfigMap{})
	return err == nil, client.IgnoreNotFound(err)
}

func setup(failBootstrap, failInfra string) (*Creator, Makers, *[]string) {
	c := fake.NewClientBuilder().WithScheme(scheme.New()).Build()
	made := &[]string{}
	return &Creator{Writer: c, FieldManager: testManager, Machines: c, Objects: c},
		Makers{
			Bootstrap:      configMaps{c: c, suffix: "-boot", fail: failBootstrap, made: made},
			Infrastructure: configMaps{c: c, suffix: "-infra", fail: failInfra, made: made},
		}, made
}

// machines returns newMachine functions that name Machines m0, m1, ... and
// fail for the Machine numbered failAt.
func machines(failAt int) func() (*clusterv1.Machine, error) {
	i := 0
	return func() (*clusterv1.Machine, error) {
		defer func() { i++ }()
		if i == failAt {
			return nil, errors.New("no name")
		}
		return &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("m%d", i)}}, nil
	}
}

func names(ms []*clusterv1.Machine) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Name)
	}
	return out
}

func TestCreate(t *testing.T) {
	tests := []struct {
		name                  string
		machineFails          int
		failBoot, failInfra   string
		machines, made        []string
		machineErr, objectErr bool
		unfinished            string
	}{
		{name: "all", machineFails: -1, machines: []string{"m0", "m1"}, made: []string{"m0-boot", "m0-infra", "m1-boot", "m1-infra"}},
		{name: "second Machine fails: the first still gets its objects", machineFails: 1,
			machines: []string{"m0"}, made: []string{"m0-boot", "m0-infra"}, machineErr: true},
		{name: "an object fails: the Machines stay, later ones get nothing", machineFails: -1, failInfra: "m0",
			machines: []string{"m0", "m1"}, made: []string{"m0-boot"}, objectErr: true, unfinished: "m0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, makers, made := setup(tt.failBoot, tt.failInfra)
			got, err := c.Create(context.Background(), 2, machines(tt.machineFails), makers)
			if !slices.Equal(names(got.Machines), tt.machines) || !slices.Equal(*made, tt.made) {
				t.Errorf("Machines %v, objects %v; want %v, %v", names(got.Machines), *made, tt.machines, tt.made)
			}
			if len(got.Objects) != len(tt.made) {
				t.Errorf("%d objects returned, %d made", len(got.Objects), len(tt.made))
			}
			if (got.MachineErr != nil) != tt.machineErr || (got.ObjectsErr != nil) != tt.objectErr || got.CacheErr != nil {
				t.Errorf("MachineErr %v, ObjectsErr %v, CacheErr %v", got.MachineErr, got.ObjectsErr, got.CacheErr)
			}
			if (err != nil) != (tt.machineErr || tt.objectErr) {
				t.Errorf("error %v", err)
			}
			if tt.unfinished != "" && (got.Unfinished == nil || got.Unfinished.Name != tt.unfinished) {
				t.Errorf("Unfinished %v, want %s", got.Unfinished, tt.unfinished)
			}
			for _, m := range got.Machines {
				if m.Spec.Bootstrap.ConfigRef.Name != m.Name+"-boot" || m.Spec.InfrastructureRef.Name != m.Name+"-infra" {
					t.Errorf("Machine %s references %+v, %+v", m.Name, m.Spec.Bootstrap.ConfigRef, m.Spec.InfrastructureRef)
				}
			}
		})
	}
}

// setBy marks the Machine's references as written by manager, as the API
// server's managed fields would.
func setBy(m *clusterv1.Machine, manager string) {
	m.ManagedFields = []metav1.ManagedFieldsEntry{{
		Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, FieldsType: "FieldsV1",
		FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:bootstrap":{"f:configRef":{}},"f:infrastructureRef":{}}}`)},
	}}
}

func TestRepair(t *testing.T) {
	ctx := context.Background()
	c, makers, made := setup("", "broken")
	machine := func(name string, change func(*clusterv1.Machine)) *clusterv1.Machine {
		m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Spec: clusterv1.MachineSpec{
			Bootstrap:         clusterv1.Bootstrap{ConfigRef: makers.Bootstrap.Reference(name)},
			InfrastructureRef: makers.Infrastructure.Reference(name),
		}}
		if change != nil {
			change(m)
		}
		if err := c.Writer.Create(ctx, m); err != nil {
			t.Fatal(err)
		}
		setBy(m, testManager)
		return m
	}
	crashed := machine("crashed", nil)
	half := machine("half", nil)
	if _, err := makers.Bootstrap.Make(ctx, half); err != nil {
		t.Fatal(err)
	}
	*made = nil
	foreign := machine("foreign", nil)
	setBy(foreign, "someone-else")
	adopted := machine("adopted", nil)
	provisioned := machine("provisioned", func(m *clusterv1.Machine) {
		m.Status.Initialization.InfrastructureProvisioned = ptr.To(true)
	})
	withSecret := machine("secret", func(m *clusterv1.Machine) { m.Spec.Bootstrap.DataSecretName = ptr.To("data") })
	// Deleting only in the fresh read: the cache was behind.
	lateDelete := machine("late-delete", nil)
	stale := lateDelete.DeepCopy()
	stale.Finalizers = []string{"keep"}
	if err := c.Writer.Update(ctx, stale); err != nil {
		t.Fatal(err)
	}
	if err := c.Writer.Delete(ctx, stale); err != nil {
		t.Fatal(err)
	}
	broken := machine("broken", nil)

	owned := []Owned{{Machine: crashed}, {Machine: half}, {Machine: foreign}, {Machine: adopted, Adopting: true},
		{Machine: provisioned}, {Machine: withSecret}, {Machine: lateDelete}, {Machine: broken}}
	got, err := c.Repair(ctx, owned, makers, configMapsFound{c: c.Writer})
	// The crashed Machine gets both objects, the half-made one and the one
	// with a data secret their infrastructure, the broken one its bootstrap
	// object before its infrastructure fails; the foreign, adopted,
	// provisioned and deleting ones get nothing.
	want := []string{"crashed-boot", "crashed-infra", "half-infra", "secret-infra", "broken-boot"}
	if !slices.Equal(*made, want) {
		t.Errorf("made %v, want %v", *made, want)
	}
	if len(got.Objects) != len(want) {
		t.Errorf("%d objects returned, %d made", len(got.Objects), len(want))
	}
	if len(got.Failed) != 1 || got.Failed[0].Machine != broken || err == nil {
		t.Errorf("failed %+v, error %v; want the broken Machine", got.Failed, err)
	}
}
