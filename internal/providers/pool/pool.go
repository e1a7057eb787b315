package pool

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/conditions"
	"capstan.dev/capstan/internal/contract"
	"capstan.dev/capstan/internal/kit"
	"capstan.dev/capstan/internal/plan"
)

// RevisionAnnotation records on an instance the revision of its
// MachinePool it was made from; an instance of another revision is
// replaced.
const RevisionAnnotation = "infrastructure.capstan.dev/pool-revision"

// Selector selects a MachinePool's instances (and its Machines).
func Selector(mp *clusterv1.MachinePool) client.MatchingLabels {
	return client.MatchingLabels{
		clusterv1.MachinePoolNameLabel: contract.LabelValue(mp.Name),
		clusterv1.ClusterNameLabel:     mp.Spec.ClusterName,
	}
}

// Revision names what an instance of mp is made from: the Kubernetes
// version and the bootstrap data. Changing either rolls the pool.
func Revision(mp *clusterv1.MachinePool) string {
	h := sha256.Sum256([]byte(mp.Spec.Template.Spec.Version + "\x00" + ptr.Deref(mp.Spec.Template.Spec.Bootstrap.DataSecretName, "")))
	return hex.EncodeToString(h[:])[:16]
}

// Instance is one instance of a pool, as its provider sees it.
type Instance struct {
	// Object is the infrastructure machine.
	Object client.Object
	// Provisioned: it booted; ProviderID is then its provider ID.
	Provisioned bool
	ProviderID  string
}

// Pool is what Sync needs to know of a provider's pool.
type Pool struct {
	// Owner is the provider's pool object, owner of its instances.
	Owner client.Object
	// OwnerAPIVersion and OwnerKind name Owner's type.
	OwnerAPIVersion, OwnerKind string
	MachinePool                *clusterv1.MachinePool
	Instances                  []Instance
	Strategy                   plan.PoolStrategy
	// New returns an instance to create, with its spec; Sync fills in its
	// metadata.
	New func() client.Object
}

// Status is what the pool reports: every instance that is not being
// deleted in Replicas, the booted ones in Ready and, sorted, in
// ProviderIDList.
type Status struct {
	Replicas, Ready int32
	ProviderIDList  []string
}

// Sync takes one step towards the MachinePool's replicas of its current
// revision (none while it is being deleted) and reports the instances.
func Sync(ctx context.Context, c client.Client, p Pool) (Status, error) {
	mp := p.MachinePool
	machines := &clusterv1.MachineList{}
	if err := c.List(ctx, machines, client.InNamespace(mp.Namespace), Selector(mp)); err != nil {
		return Status{}, err
	}
	byName := map[string]*clusterv1.Machine{}
	for i := range machines.Items {
		byName[machines.Items[i].Name] = &machines.Items[i]
	}
	want := int(ptr.Deref(mp.Spec.Replicas, 0))
	if !mp.DeletionTimestamp.IsZero() {
		want = 0
	}
	step := plan.NextPoolStep(instances(p, byName), want, p.Strategy)

	var errs []error
	for i := 0; i < step.Create; i++ {
		obj, err := create(ctx, c, p)
		if err != nil {
			errs = append(errs, err)
			break
		}
		p.Instances = append(p.Instances, Instance{Object: obj})
	}
	for _, name := range step.Delete {
		if err := remove(ctx, c, p, byName, name); err != nil {
			errs = append(errs, err)
		}
	}
	return report(p.Instances), errors.Join(errs...)
}

// instances is what plan.NextPoolStep needs of p's instances; their
// Machines are the core's, by the instance's name.
func instances(p Pool, machines map[string]*clusterv1.Machine) []plan.PoolInstance {
	revision := Revision(p.MachinePool)
	out := make([]plan.PoolInstance, 0, len(p.Instances))
	for _, in := range p.Instances {
		obj := in.Object
		pi := plan.PoolInstance{
			Name:     obj.GetName(),
			UpToDate: obj.GetAnnotations()[RevisionAnnotation] == revision,
			Ready:    in.Provisioned,
			Deleting: !obj.GetDeletionTimestamp().IsZero(),
		}
		if m := machines[obj.GetName()]; m != nil {
			_, pi.DeleteAnnotation = m.Annotations[clusterv1.DeleteMachineAnnotation]
			pi.Ready = pi.Ready && conditions.IsTrue(m, clusterv1.ReadyCondition)
			pi.Deleting = pi.Deleting || !m.DeletionTimestamp.IsZero()
			if hc := conditions.Get(m, clusterv1.HealthCheckSucceededCondition); hc != nil && hc.Status == metav1.ConditionFalse {
				pi.Unhealthy = true
			}
		}
		out = append(out, pi)
	}
	return out
}

// create makes one instance. The API server picks the name's suffix: a
// create whose answer is lost makes one too many, which the next step
// sheds.
func create(ctx context.Context, c client.Client, p Pool) (client.Object, error) {
	mp := p.MachinePool
	obj := p.New()
	obj.SetGenerateName(mp.Name + "-")
	obj.SetNamespace(mp.Namespace)
	obj.SetLabels(Selector(mp))
	obj.SetAnnotations(map[string]string{RevisionAnnotation: Revision(mp)})
	obj.SetOwnerReferences([]metav1.OwnerReference{{
		APIVersion: p.OwnerAPIVersion, Kind: p.OwnerKind, Name: p.Owner.GetName(), UID: p.Owner.GetUID(),
	}})
	if err := c.Create(ctx, obj); err != nil {
		return nil, fmt.Errorf("creating an instance of %s %s: %w", p.OwnerKind, p.Owner.GetName(), err)
	}
	return obj, nil
}

// remove deletes one instance: through its Machine when it has one, so
// that its Node is drained first and the Machine controller deletes the
// infrastructure machine; directly otherwise.
func remove(ctx context.Context, c client.Client, p Pool, machines map[string]*clusterv1.Machine, name string) error {
	var obj client.Object
	if m := machines[name]; m != nil {
		obj = m
	} else {
		for _, in := range p.Instances {
			if in.Object.GetName() == name {
				obj = in.Object
			}
		}
	}
	if obj == nil {
		return nil
	}
	if err := c.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting instance %s of %s %s: %w", name, p.OwnerKind, p.Owner.GetName(), err)
	}
	obj.SetDeletionTimestamp(ptr.To(metav1.Now()))
	return nil
}

// DeleteAll deletes what is left of a pool being deleted (normally the
// core deleted the Machines, and so the instances, before the pool) and
// tells how many instances still exist.
func DeleteAll(ctx context.Context, c client.Client, list []Instance) (int, error) {
	for _, in := range list {
		if !in.Object.GetDeletionTimestamp().IsZero() {
			continue
		}
		if err := c.Delete(ctx, in.Object); err != nil && !apierrors.IsNotFound(err) {
			return len(list), err
		}
	}
	return len(list), nil
}

func report(list []Instance) Status {
	var st Status
	for _, in := range list {
		if !in.Object.GetDeletionTimestamp().IsZero() {
			continue
		}
		st.Replicas++
		if in.Provisioned && in.ProviderID != "" {
			st.Ready++
			st.ProviderIDList = append(st.ProviderIDList, in.ProviderID)
		}
	}
	sort.Strings(st.ProviderIDList)
	return st
}

// MemberToPool is a map function that wakes the provider pool of the
// MachinePool an instance or Machine is labelled with, when the pool's
// infrastructureRef names one of group and kind.
func MemberToPool(c client.Reader, group, kind string) handler.MapFunc {
	return func(ctx context.Context, obj client.Object) []reconcile.Request {
		name := obj.GetLabels()[clusterv1.MachinePoolNameLabel]
		if name == "" {
			return nil
		}
		mp := &clusterv1.MachinePool{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: obj.GetNamespace(), Name: name}, mp); err != nil {
			return nil
		}
		return MachinePoolToPool(group, kind)(ctx, mp)
	}
}

// MachinePoolToPool is a map function from a MachinePool to the provider
// pool it references, when that is of group and kind.
func MachinePoolToPool(group, kind string) handler.MapFunc {
	return func(_ context.Context, obj client.Object) []reconcile.Request {
		mp, ok := obj.(*clusterv1.MachinePool)
		if !ok {
			return nil
		}
		ref := mp.Spec.Template.Spec.InfrastructureRef
		if ref.APIGroup != group || ref.Kind != kind || ref.Name == "" {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: mp.Namespace, Name: ref.Name}}}
	}
}

// OwnedBy tells whether obj has owner among its owners (as an instance has
// its pool, controller or not: the Machine controller takes control of it).
func OwnedBy(obj, owner metav1.Object) bool {
	for _, ref := range obj.GetOwnerReferences() {
		if ref.UID == owner.GetUID() {
			return true
		}
	}
	return false
}

// OwningMachinePool reads the MachinePool that controls a provider pool;
// nil, without an error, when none does (yet) or it is gone.
func OwningMachinePool(ctx context.Context, c client.Reader, obj client.Object) (*clusterv1.MachinePool, error) {
	for _, ref := range obj.GetOwnerReferences() {
		if ref.Kind != clusterv1.MachinePoolKind || !ptr.Deref(ref.Controller, false) {
			continue
		}
		mp := &clusterv1.MachinePool{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: obj.GetNamespace(), Name: ref.Name}, mp); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, nil
			}
			return nil, err
		}
		return mp, nil
	}
	return nil, nil
}

// Scope is what a provider pool's reconcile starts from: the MachinePool
// that controls the pool (nil once it is gone), its Cluster (nil when it
// does not exist) and the pool's instances.
type Scope struct {
	MachinePool *clusterv1.MachinePool
	Cluster     *clusterv1.Cluster
	Instances   []Instance
}

// ReadScope reads a provider pool's scope. list receives the instances'
// kind (listed by the pool-name label, kept when owner owns them); describe
// turns each item into an Instance. A pool no MachinePool controls yet is
// kit.NotYet: the MachinePool controller takes control, and that write
// brings the pool back.
func ReadScope[L client.ObjectList](ctx context.Context, c client.Reader, owner client.Object, list L, describe func(L) []Instance) (*Scope, error) {
	mp, err := OwningMachinePool(ctx, c, owner)
	if err != nil {
		return nil, err
	}
	if mp == nil && owner.GetDeletionTimestamp().IsZero() {
		return nil, kit.NotYet(0)
	}
	s := &Scope{MachinePool: mp}
	if mp != nil {
		cluster := &clusterv1.Cluster{}
		switch err := c.Get(ctx, types.NamespacedName{Namespace: mp.Namespace, Name: mp.Spec.ClusterName}, cluster); {
		case err == nil:
			s.Cluster = cluster
		case !apierrors.IsNotFound(err):
			return nil, err
		}
	}
	if err := c.List(ctx, list, client.InNamespace(owner.GetNamespace()), client.HasLabels{clusterv1.MachinePoolNameLabel}); err != nil {
		return nil, err
	}
	for _, in := range describe(list) {
		if OwnedBy(in.Object, owner) {
			s.Instances = append(s.Instances, in)
		}
	}
	return s, nil
}
