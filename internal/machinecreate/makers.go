package machinecreate

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/contract"
	"capstan.dev/capstan/internal/plan"
)

// Maker makes one of the objects an owner's Machines reference.
type Maker interface {
	// Reference is what a Machine called machineName holds to the object
	// made for it. It is known before the object exists, so that the
	// Machine can be created first.
	Reference(machineName string) clusterv1.ContractVersionedObjectReference
	// Make creates the object of Machine m, which exists, with m as its
	// controller. An object of that name that already exists counts as
	// made: an earlier attempt made it.
	Make(ctx context.Context, m *clusterv1.Machine) (client.Object, error)
}

// Makers are the makers of an owner's Machines' objects. Bootstrap is nil
// when the owner makes no bootstrap object (its Machines get their data
// secret some other way); either is nil when the owner cannot make that
// object now (its template could not be read), which Repair then leaves
// alone.
type Makers struct {
	Bootstrap, Infrastructure Maker
}

func (k Makers) maker(slot plan.MachineObjectSlot) Maker {
	if slot == plan.BootstrapObject {
		return k.Bootstrap
	}
	return k.Infrastructure
}

// reference is what a Machine called name holds in slot; zero without a
// maker.
func (k Makers) reference(slot plan.MachineObjectSlot, name string) clusterv1.ContractVersionedObjectReference {
	if mk := k.maker(slot); mk != nil {
		return mk.Reference(name)
	}
	return clusterv1.ContractVersionedObjectReference{}
}

// TemplateClone makes a Machine's object by cloning a provider template
// under the Machine's name.
type TemplateClone struct {
	Resolver *contract.Resolver
	// Writer creates with the owner's field manager.
	Writer   client.Client
	Template *unstructured.Unstructured
	// Labels and Annotations go on every clone, over the template's own.
	Labels, Annotations map[string]string
}

// Reference is the reference to the clone of the template called
// machineName.
func (c TemplateClone) Reference(machineName string) clusterv1.ContractVersionedObjectReference {
	return contract.ClonedReference(c.Template, machineName)
}

// Make clones the template for m.
func (c TemplateClone) Make(ctx context.Context, m *clusterv1.Machine) (client.Object, error) {
	obj, err := contract.CloneTemplate(ctx, c.Resolver, c.Writer, c.Template, contract.Clone{
		Namespace: m.Namespace, Name: m.Name, ClusterName: m.Spec.ClusterName,
		Labels: c.Labels, Annotations: c.Annotations, Owner: contract.MachineOwner(m),
	})
	if err != nil {
		// A nil *Unstructured would make a non-nil client.Object.
		return nil, err
	}
	return obj, nil
}

// Finder tells whether the object a Machine's reference in slot names
// exists.
type Finder interface {
	Exists(ctx context.Context, m *clusterv1.Machine, slot plan.MachineObjectSlot, ref clusterv1.ContractVersionedObjectReference) (bool, error)
}

// InCache finds objects in a cache: the one a Machine's objects show up
// in, so that what a reconcile has just created is not taken for missing.
type InCache struct {
	Resolver *contract.Resolver
	Cache    client.Reader
}

// Exists looks the object up in the cache.
func (f InCache) Exists(ctx context.Context, m *clusterv1.Machine, _ plan.MachineObjectSlot, ref clusterv1.ContractVersionedObjectReference) (bool, error) {
	gvk, err := f.Resolver.GroupVersionKind(ctx, ref)
	if err != nil {
		return false, err
	}
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gvk)
	if err := f.Cache.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: ref.Name}, obj); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return true, nil
}
