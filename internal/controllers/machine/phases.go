package machine

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/contract"
	"capstan.dev/capstan/internal/workload"
)

// scope is what one reconcile learns about a Machine.
type scope struct {
	machine *clusterv1.Machine
	cluster *clusterv1.Cluster
	now     time.Time

	paused         bool
	clusterMissing bool

	bootstrap    *unstructured.Unstructured
	bootstrapErr error

	infra    *unstructured.Unstructured
	infraErr error

	node    *corev1.Node
	nodeErr error // why the Node could not be looked up

	deleting string // what deletion waits for
	// waitingForPreTerminateHooks: drained, held only by pre-terminate hooks.
	waitingForPreTerminateHooks bool
}

// external reads the object ref names and makes the Machine its controller.
// A MachineSet that cloned the object hands controllership over here.
func (r *Reconciler) external(ctx context.Context, s *scope, ref clusterv1.ContractVersionedObjectReference) (*unstructured.Unstructured, error) {
	return r.Resolver.Claim(ctx, r.Client, r.externalWatches, ref, s.machine.Namespace, func(obj *unstructured.Unstructured) error {
		takeControl(obj, s.machine)
		labels := obj.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels[clusterv1.ClusterNameLabel] = s.machine.Spec.ClusterName
		obj.SetLabels(labels)
		return nil
	})
}

// takeControl makes m the controller of obj, demoting (not removing) a
// previous controller such as the MachineSet that cloned obj.
func takeControl(obj *unstructured.Unstructured, m *clusterv1.Machine) {
	refs := obj.GetOwnerReferences()
	found := false
	for i := range refs {
		if refs[i].UID == m.UID {
			refs[i].Controller = ptr.To(true)
			found = true
			continue
		}
		if ptr.Deref(refs[i].Controller, false) {
			refs[i].Controller = ptr.To(false)
		}
	}
	if !found {
		refs = append(refs, *controllerRef(m))
	}
	obj.SetOwnerReferences(refs)
}

// controllerRef is the reference the creators of Machines (MachineSets,
// KubeadmControlPlanes) put on the objects they create for a Machine: when
// the two are the same, takeControl changes nothing and no patch goes out.
func controllerRef(m *clusterv1.Machine) *metav1.OwnerReference {
	ref := contract.MachineOwner(m)
	return &ref
}

func (r *Reconciler) reconcileBootstrap(ctx context.Context, s *scope) (time.Duration, error) {
	m := s.machine
	ref := m.Spec.Bootstrap.ConfigRef
	if !ref.IsDefined() {
		// The user supplied the data secret directly.
		m.Status.Initialization.BootstrapDataSecretCreated = ptr.To(m.Spec.Bootstrap.DataSecretName != nil && *m.Spec.Bootstrap.DataSecretName != "")
		return 0, nil
	}
	obj, err := r.external(ctx, s, ref)
	if err != nil {
		s.bootstrapErr = err
		return contract.RetryIfMissing(err)
	}
	s.bootstrap = obj
	created, err := contract.DataSecretCreated(obj)
	if err != nil {
		s.bootstrapErr = err
		return 0, err
	}
	if !created {
		if m.Status.Initialization.BootstrapDataSecretCreated == nil {
			m.Status.Initialization.BootstrapDataSecretCreated = ptr.To(false)
		}
		return 0, nil
	}
	name, err := contract.DataSecretName(obj)
	if err != nil {
		return 0, err
	}
	if name == "" {
		s.bootstrapErr = fmt.Errorf("%s %s reports its data secret created but names none in status.dataSecretName", ref.Kind, ref.Name)
		return 0, nil
	}
	m.Spec.Bootstrap.DataSecretName = ptr.To(name)
	m.Status.Initialization.BootstrapDataSecretCreated = ptr.To(true)
	return 0, nil
}

func (r *Reconciler) reconcileInfrastructure(ctx context.Context, s *scope) (time.Duration, error) {
	m := s.machine
	obj, err := r.external(ctx, s, m.Spec.InfrastructureRef)
	if err != nil {
		s.infraErr = err
		return contract.RetryIfMissing(err)
	}
	s.infra = obj
	provisioned, err := contract.InfrastructureProvisioned(obj)
	if err != nil {
		s.infraErr = err
		return 0, err
	}
	if !provisioned {
		if m.Status.Initialization.InfrastructureProvisioned == nil {
			m.Status.Initialization.InfrastructureProvisioned = ptr.To(false)
		}
		return 0, nil
	}
	m.Status.Initialization.InfrastructureProvisioned = ptr.To(true)
	id, err := contract.ProviderID(obj)
	if err != nil {
		return 0, err
	}
	if id != "" {
		m.Spec.ProviderID = id
	}
	addresses, err := contract.Addresses(obj)
	if err != nil {
		return 0, err
	}
	m.Status.Addresses = addresses
	placed, err := contract.PlacedFailureDomain(obj)
	if err != nil {
		return 0, err
	}
	if placed != "" {
		m.Status.FailureDomain = placed
	}
	if m.Spec.FailureDomain == "" {
		fd, err := contract.FailureDomain(obj)
		if err != nil {
			return 0, err
		}
		m.Spec.FailureDomain = fd
	}
	return 0, nil
}

// reconcileNode finds the Machine's Node in the workload cluster once the
// control plane is up and the infrastructure has given the Machine a
// providerID.
func (r *Reconciler) reconcileNode(ctx context.Context, s *scope) (time.Duration, error) {
	m := s.machine
	if m.Spec.ProviderID == "" || !workload.Reachable(s.cluster) || r.Workload == nil {
		return 0, nil
	}
	key := client.ObjectKeyFromObject(s.cluster)
	if err := r.Workload.Watch(ctx, key, workload.WatchInput{
		Name:    "machine-nodes",
		Watcher: r.controller,
		Kind:    &corev1.Node{},
		Handler: handler.EnqueueRequestsFromMapFunc(r.nodeToMachine(m.Namespace)),
	}); err != nil {
		s.nodeErr = err
		return workload.RetryAfter(err), nil
	}
	c, err := r.Workload.GetClient(ctx, key)
	if err != nil {
		s.nodeErr = err
		return workload.RetryAfter(err), nil
	}
	node, err := nodeByProviderID(ctx, c, m.Spec.ProviderID)
	if err != nil {
		s.nodeErr = err
		return workload.RetryAfter(err), nil
	}
	if node == nil {
		if m.Status.NodeRef.Name != "" {
			s.nodeErr = fmt.Errorf("node %s with providerID %s %w", m.Status.NodeRef.Name, m.Spec.ProviderID, errNodeDeleted)
		}
		return 0, nil
	}
	s.node = node
	m.Status.NodeRef = clusterv1.MachineNodeReference{Name: node.Name}
	info := node.Status.NodeInfo
	m.Status.NodeInfo = &info
	return 0, r.syncNode(ctx, c, s)
}

// errNodeDeleted: the Machine's Node, found before, is gone from the
// workload cluster.
var errNodeDeleted = errors.New("was deleted from the workload cluster")

func nodeByProviderID(ctx context.Context, c client.Reader, providerID string) (*corev1.Node, error) {
	nodes := &corev1.NodeList{}
	if err := c.List(ctx, nodes); err != nil {
		return nil, err
	}
	for i := range nodes.Items {
		if nodes.Items[i].Spec.ProviderID == providerID {
			return &nodes.Items[i], nil
		}
	}
	return nil, nil
}
