package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/conditions"
	"capstan.dev/capstan/internal/contract"
	"capstan.dev/capstan/internal/index"
	"capstan.dev/capstan/internal/plan"
)

// scope is everything one reconcile learns about a Cluster.
type scope struct {
	cluster *clusterv1.Cluster
	paused  bool

	infra    *unstructured.Unstructured
	infraErr error // why infra could not be read, for the condition

	controlPlane    *unstructured.Unstructured
	controlPlaneErr error

	machines           []clusterv1.Machine
	machineSets        []clusterv1.MachineSet
	machineDeployments []clusterv1.MachineDeployment
	machinePools       []clusterv1.MachinePool
	machinesRead       bool

	remoteConnection *metav1.Condition

	deleting string // what deletion waits for
}

// external reads the object ref names and makes the Cluster its controller.
func (r *Reconciler) external(ctx context.Context, s *scope, ref clusterv1.ContractVersionedObjectReference) (*unstructured.Unstructured, error) {
	return r.Resolver.Claim(ctx, r.Client, r.externalWatches, ref, s.cluster.Namespace, func(obj *unstructured.Unstructured) error {
		err := controllerutil.SetControllerReference(s.cluster, obj, r.Client.Scheme())
		var owned *controllerutil.AlreadyOwnedError
		if errors.As(err, &owned) {
			return fmt.Errorf("%s %s is already controlled by %s %s; a provider object belongs to one Cluster", ref.Kind, ref.Name, owned.Owner.Kind, owned.Owner.Name)
		}
		return err
	})
}

func (r *Reconciler) reconcileInfrastructure(ctx context.Context, s *scope) (time.Duration, error) {
	c := s.cluster
	ref := c.Spec.InfrastructureRef
	if !ref.IsDefined() {
		// A Cluster without infrastructure (the control plane brings its
		// own) has nothing to wait for.
		c.Status.Initialization.InfrastructureProvisioned = ptr.To(true)
		return 0, nil
	}
	obj, err := r.external(ctx, s, ref)
	if err != nil {
		s.infraErr = err
		return contract.RetryIfMissing(err)
	}
	s.infra = obj
	if !obj.GetDeletionTimestamp().IsZero() {
		return 0, nil
	}
	provisioned, err := contract.InfrastructureProvisioned(obj)
	if err != nil {
		s.infraErr = err
		return 0, err
	}
	if provisioned {
		// Once provisioned, always provisioned: later trouble shows in the
		// conditions, never by turning the clock back.
		c.Status.Initialization.InfrastructureProvisioned = ptr.To(true)
	} else if c.Status.Initialization.InfrastructureProvisioned == nil {
		c.Status.Initialization.InfrastructureProvisioned = ptr.To(false)
	}
	if !c.Spec.ControlPlaneEndpoint.IsValid() {
		ep, err := contract.ControlPlaneEndpoint(obj)
		if err != nil {
			return 0, err
		}
		if ep.IsValid() {
			c.Spec.ControlPlaneEndpoint = ep
		}
	}
	domains, err := contract.FailureDomains(obj)
	if err != nil {
		return 0, err
	}
	c.Status.FailureDomains = domains
	return 0, nil
}

func (r *Reconciler) reconcileControlPlane(ctx context.Context, s *scope) (time.Duration, error) {
	c := s.cluster
	ref := c.Spec.ControlPlaneRef
	if !ref.IsDefined() {
		return 0, nil
	}
	obj, err := r.external(ctx, s, ref)
	if err != nil {
		s.controlPlaneErr = err
		return contract.RetryIfMissing(err)
	}
	s.controlPlane = obj
	if !obj.GetDeletionTimestamp().IsZero() {
		return 0, nil
	}
	initialized, err := contract.ControlPlaneInitialized(obj)
	if err != nil {
		s.controlPlaneErr = err
		return 0, err
	}
	if initialized {
		c.Status.Initialization.ControlPlaneInitialized = ptr.To(true)
	} else if c.Status.Initialization.ControlPlaneInitialized == nil {
		c.Status.Initialization.ControlPlaneInitialized = ptr.To(false)
	}
	ep, err := contract.ControlPlaneEndpoint(obj)
	if err != nil {
		return 0, err
	}
	if ep.IsValid() && !c.Spec.ControlPlaneEndpoint.IsValid() {
		c.Spec.ControlPlaneEndpoint = ep
	}
	replicas, err := contract.Replicas(obj)
	if err != nil {
		return 0, err
	}
	c.Status.ControlPlane = keepTopologyFields(c.Status.ControlPlane, &clusterv1.ClusterControlPlaneStatus{
		DesiredReplicas:   replicas.Desired,
		Replicas:          replicas.Current,
		ReadyReplicas:     replicas.Ready,
		AvailableReplicas: replicas.Available,
		UpToDateReplicas:  replicas.UpToDate,
	})
	return 0, nil
}

// readMachines lists the Cluster's Machines, MachineSets,
// MachineDeployments and MachinePools from the cache.
func (r *Reconciler) readMachines(ctx context.Context, s *scope) error {
	if s.machinesRead {
		return nil
	}
	in := index.InCluster(s.cluster.Namespace, s.cluster.Name)
	machines := &clusterv1.MachineList{}
	if err := r.Client.List(ctx, machines, in...); err != nil {
		return err
	}
	sets := &clusterv1.MachineSetList{}
	if err := r.Client.List(ctx, sets, in...); err != nil {
		return err
	}
	deployments := &clusterv1.MachineDeploymentList{}
	if err := r.Client.List(ctx, deployments, in...); err != nil {
		return err
	}
	pools := &clusterv1.MachinePoolList{}
	if err := r.Client.List(ctx, pools, in...); err != nil {
		return err
	}
	s.machines, s.machineSets, s.machineDeployments, s.machinePools = machines.Items, sets.Items, deployments.Items, pools.Items
	s.machinesRead = true
	return nil
}

func isControlPlaneMachine(m *clusterv1.Machine) bool {
	_, ok := m.Labels[clusterv1.MachineControlPlaneLabel]
	return ok
}

func ownedBy(obj client.Object, kind string) bool {
	for _, ref := range obj.GetOwnerReferences() {
		if ref.Kind == kind && ref.Controller != nil && *ref.Controller {
			return true
		}
	}
	return false
}

// reconcileMachines counts control plane and worker replicas. A Cluster
// whose control plane is not an object (bare control plane Machines) is
// initialized when one of those Machines has a Node.
func (r *Reconciler) reconcileMachines(ctx context.Context, s *scope) (time.Duration, error) {
	if err := r.readMachines(ctx, s); err != nil {
		return 0, err
	}
	c := s.cluster
	var workers, controlPlane counters
	var workerMachines, controlPlaneMachines []*clusterv1.Machine
	for i := range s.machines {
		m := &s.machines[i]
		if isControlPlaneMachine(m) {
			controlPlaneMachines = append(controlPlaneMachines, m)
			controlPlane.add(m)
			if !c.Spec.ControlPlaneRef.IsDefined() && m.Status.NodeRef.Name != "" {
				c.Status.Initialization.ControlPlaneInitialized = ptr.To(true)
			}
			continue
		}
		workerMachines = append(workerMachines, m)
		workers.add(m)
		if !ownedBy(m, "MachineSet") && !ownedBy(m, "MachinePool") {
			workers.desired++
		}
	}
	for i := range s.machineSets {
		if !ownedBy(&s.machineSets[i], "MachineDeployment") {
			workers.desired += ptr.Deref(s.machineSets[i].Spec.Replicas, 0)
		}
	}
	for i := range s.machineDeployments {
		workers.desired += ptr.Deref(s.machineDeployments[i].Spec.Replicas, 0)
	}
	for i := range s.machinePools {
		workers.desired += ptr.Deref(s.machinePools[i].Spec.Replicas, 0)
	}
	c.Status.Workers = keepWorkersTopologyFields(c.Status.Workers, workers.workersStatus())
	if !c.Spec.ControlPlaneRef.IsDefined() {
		controlPlane.desired = controlPlane.current
		cp := controlPlane.workersStatus()
		c.Status.ControlPlane = keepTopologyFields(c.Status.ControlPlane, &clusterv1.ClusterControlPlaneStatus{
			DesiredReplicas: cp.DesiredReplicas, Replicas: cp.Replicas, ReadyReplicas: cp.ReadyReplicas,
			AvailableReplicas: cp.AvailableReplicas, UpToDateReplicas: cp.UpToDateReplicas,
		})
		if c.Status.Initialization.ControlPlaneInitialized == nil {
			c.Status.Initialization.ControlPlaneInitialized = ptr.To(false)
		}
	}
	// The version counts tell how far an upgrade has come, for the
	// control plane and the workers apart.
	c.Status.Workers.Versions = plan.CountVersions(workerMachines)
	if c.Status.ControlPlane != nil {
		c.Status.ControlPlane.Versions = plan.CountVersions(controlPlaneMachines)
	}
	return 0, nil
}

type counters struct {
	desired, current, ready, available, upToDate int32
}

func (c *counters) add(m *clusterv1.Machine) {
	c.current++
	if conditions.IsTrue(m, clusterv1.ReadyCondition) {
		c.ready++
	}
	if conditions.IsTrue(m, clusterv1.AvailableCondition) {
		c.available++
	}
	if conditions.IsTrue(m, clusterv1.UpToDateCondition) {
		c.upToDate++
	}
}

func (c counters) workersStatus() *clusterv1.WorkersStatus {
	return &clusterv1.WorkersStatus{
		DesiredReplicas: ptr.To(c.desired), Replicas: ptr.To(c.current), ReadyReplicas: ptr.To(c.ready),
		AvailableReplicas: ptr.To(c.available), UpToDateReplicas: ptr.To(c.upToDate),
	}
}

// keepTopologyFields carries over, from the status as read, the control
// plane fields the counters do not set: the upgrade plan, which is the
// topology controller's (replacing the whole struct would make this
// controller's patch remove it), and the version counts, which
// reconcileMachines recounts.
func keepTopologyFields(old, counted *clusterv1.ClusterControlPlaneStatus) *clusterv1.ClusterControlPlaneStatus {
	if old != nil {
		counted.Versions, counted.UpgradePlan = old.Versions, old.UpgradePlan
	}
	return counted
}

// keepWorkersTopologyFields is keepTopologyFields for the workers.
func keepWorkersTopologyFields(old, counted *clusterv1.WorkersStatus) *clusterv1.WorkersStatus {
	if old != nil {
		counted.Versions, counted.UpgradePlan = old.Versions, old.UpgradePlan
	}
	return counted
}
