package machinepool

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/contract"
)

// external reads the object ref names and makes the pool its controller,
// with the cluster-name label, as upstream's pool controller does with the
// objects the user created for it. It writes only when something is
// missing.
func (r *Reconciler) external(ctx context.Context, s *scope, ref clusterv1.ContractVersionedObjectReference) (*unstructured.Unstructured, error) {
	writer := client.WithFieldOwner(r.Client, FieldManager)
	return r.Resolver.Claim(ctx, writer, r.externalWatches, ref, s.mp.Namespace, func(obj *unstructured.Unstructured) error {
		takeControl(obj, s.mp)
		labels := obj.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels[clusterv1.ClusterNameLabel] = s.mp.Spec.ClusterName
		obj.SetLabels(labels)
		return nil
	})
}

// takeControl makes mp the controller of obj, with an owner reference that
// blocks the owner's deletion; an earlier controller stays an owner but
// hands control over.
func takeControl(obj *unstructured.Unstructured, mp *clusterv1.MachinePool) {
	refs := obj.GetOwnerReferences()
	found := false
	for i := range refs {
		if refs[i].UID == mp.UID {
			refs[i].Controller, refs[i].BlockOwnerDeletion = ptr.To(true), ptr.To(true)
			found = true
		} else if ptr.Deref(refs[i].Controller, false) {
			refs[i].Controller = ptr.To(false)
		}
	}
	if !found {
		refs = append(refs, poolOwner(mp))
	}
	obj.SetOwnerReferences(refs)
}

// reconcileBootstrap makes the pool the controller of its bootstrap config
// and, once the config has written its data secret, records the secret's
// name in spec.template.spec.bootstrap.dataSecretName, where the
// infrastructure provider reads it. A pool with only a dataSecretName
// brought its own data.
func (r *Reconciler) reconcileBootstrap(ctx context.Context, s *scope) (time.Duration, error) {
	mp := s.mp
	ref := mp.Spec.Template.Spec.Bootstrap.ConfigRef
	if !ref.IsDefined() {
		created := ptr.Deref(mp.Spec.Template.Spec.Bootstrap.DataSecretName, "") != ""
		mp.Status.Initialization.BootstrapDataSecretCreated = ptr.To(created)
		return 0, nil
	}
	obj, err := r.external(ctx, s, ref)
	if err != nil {
		s.bootstrapErr = err
		return contract.RetryIfMissing(err)
	}
	s.bootstrap = obj
	if !obj.GetDeletionTimestamp().IsZero() {
		return 0, nil
	}
	created, err := contract.DataSecretCreated(obj)
	if err != nil {
		s.bootstrapErr = err
		return 0, err
	}
	if !created {
		if mp.Status.Initialization.BootstrapDataSecretCreated == nil {
			mp.Status.Initialization.BootstrapDataSecretCreated = ptr.To(false)
		}
		return 0, nil
	}
	name, err := contract.DataSecretName(obj)
	if err != nil {
		s.bootstrapErr = err
		return 0, err
	}
	if name == "" {
		s.bootstrapErr = fmt.Errorf("%s %s reports its data secret created but names none in status.dataSecretName", ref.Kind, ref.Name)
		return 0, nil
	}
	mp.Spec.Template.Spec.Bootstrap.DataSecretName = ptr.To(name)
	mp.Status.Initialization.BootstrapDataSecretCreated = ptr.To(true)
	return 0, nil
}

// reconcileInfrastructure makes the pool the controller of its
// infrastructure pool and copies what the provider reports: provisioned
// (which never goes back), the instances' provider IDs and their number.
func (r *Reconciler) reconcileInfrastructure(ctx context.Context, s *scope) (time.Duration, error) {
	mp := s.mp
	obj, err := r.external(ctx, s, mp.Spec.Template.Spec.InfrastructureRef)
	if err != nil {
		s.infraErr = err
		return contract.RetryIfMissing(err)
	}
	s.infra = obj
	pool, err := contract.ReadInfraMachinePool(obj)
	if err != nil {
		s.infraErr = err
		return 0, err
	}
	s.infraPool, s.infraRead = pool, true
	if !pool.Provisioned {
		if mp.Status.Initialization.InfrastructureProvisioned == nil {
			mp.Status.Initialization.InfrastructureProvisioned = ptr.To(false)
		}
		return 0, nil
	}
	mp.Status.Initialization.InfrastructureProvisioned = ptr.To(true)
	mp.Status.Replicas = pool.Replicas
	if mp.Status.Replicas == nil {
		mp.Status.Replicas = ptr.To(int32(len(pool.ProviderIDList)))
	}
	// A provider that counts instances before it knows their IDs would
	// otherwise make the pool forget Nodes it still has.
	if len(pool.ProviderIDList) == 0 && ptr.Deref(pool.Replicas, 0) != 0 {
		return 0, nil
	}
	mp.Spec.ProviderIDList = pool.ProviderIDList
	return 0, nil
}
