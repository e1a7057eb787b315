package cluster

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/contract"
	"capstan.dev/capstan/internal/plan"
)

// reconcileDelete takes the Cluster's descendants down in the order the
// planner gives, one tier per pass; watches on each tier wake the Cluster
// as objects go, and the finalizer goes last.
func (r *Reconciler) reconcileDelete(ctx context.Context, s *scope) (ctrl.Result, error) {
	c := s.cluster
	if !controllerutil.ContainsFinalizer(c, clusterv1.ClusterFinalizer) {
		return ctrl.Result{}, nil
	}
	if err := r.readMachines(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	var err error
	if s.controlPlane, err = r.existing(ctx, c, c.Spec.ControlPlaneRef); err != nil {
		s.deleting = fmt.Sprintf("cannot read control plane %s %s: %v", c.Spec.ControlPlaneRef.Kind, c.Spec.ControlPlaneRef.Name, err)
		return ctrl.Result{}, err
	}
	if s.infra, err = r.existing(ctx, c, c.Spec.InfrastructureRef); err != nil {
		s.deleting = fmt.Sprintf("cannot read infrastructure cluster %s %s: %v", c.Spec.InfrastructureRef.Kind, c.Spec.InfrastructureRef.Name, err)
		return ctrl.Result{}, err
	}

	step := plan.NextClusterDeletionStep(descendants(s))
	s.deleting = step.Waiting
	if step.Done {
		if r.Workload != nil {
			r.Workload.Disconnect(client.ObjectKeyFromObject(c))
		}
		controllerutil.RemoveFinalizer(c, clusterv1.ClusterFinalizer)
		return ctrl.Result{}, nil
	}

	var doomed []client.Object
	for _, name := range step.MachineDeployments {
		doomed = append(doomed, &clusterv1.MachineDeployment{ObjectMeta: objectMeta(c, name)})
	}
	for _, name := range step.MachineSets {
		doomed = append(doomed, &clusterv1.MachineSet{ObjectMeta: objectMeta(c, name)})
	}
	for _, name := range step.MachinePools {
		doomed = append(doomed, &clusterv1.MachinePool{ObjectMeta: objectMeta(c, name)})
	}
	for _, name := range step.Machines {
		doomed = append(doomed, &clusterv1.Machine{ObjectMeta: objectMeta(c, name)})
	}
	if step.ControlPlane {
		doomed = append(doomed, s.controlPlane)
	}
	if step.InfrastructureCluster {
		doomed = append(doomed, s.infra)
	}
	for _, obj := range doomed {
		if err := r.Client.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
	}
	// Provider objects may not wake the Cluster when their provider drops the
	// owner reference before going; look again now and then.
	return ctrl.Result{RequeueAfter: 30 * time.Second}, nil
}

// existing reads a referenced provider object, nil when it is gone, was
// never referenced, or cannot exist (no CRD defines its kind).
func (r *Reconciler) existing(ctx context.Context, c *clusterv1.Cluster, ref clusterv1.ContractVersionedObjectReference) (*unstructured.Unstructured, error) {
	if !ref.IsDefined() {
		return nil, nil
	}
	obj, err := r.Resolver.Get(ctx, r.Client, ref, c.Namespace)
	if contract.Absent(err) {
		return nil, nil
	}
	return obj, err
}

func descendants(s *scope) plan.ClusterDescendants {
	var d plan.ClusterDescendants
	for i := range s.machineDeployments {
		d.MachineDeployments = append(d.MachineDeployments, planObject(&s.machineDeployments[i]))
	}
	for i := range s.machineSets {
		if !ownedBy(&s.machineSets[i], "MachineDeployment") {
			d.MachineSets = append(d.MachineSets, planObject(&s.machineSets[i]))
		}
	}
	for i := range s.machinePools {
		d.MachinePools = append(d.MachinePools, planObject(&s.machinePools[i]))
	}
	for i := range s.machines {
		m := &s.machines[i]
		switch {
		case isControlPlaneMachine(m):
			d.ControlPlaneMachines = append(d.ControlPlaneMachines, planObject(m))
		case ownedBy(m, "MachineSet") || ownedBy(m, "MachinePool"):
			d.OwnedWorkerMachines = append(d.OwnedWorkerMachines, planObject(m))
		default:
			d.WorkerMachines = append(d.WorkerMachines, planObject(m))
		}
	}
	if s.controlPlane != nil {
		o := planObject(s.controlPlane)
		o.Kind = s.controlPlane.GetKind()
		d.ControlPlane = &o
	}
	if s.infra != nil {
		o := planObject(s.infra)
		o.Kind = s.infra.GetKind()
		d.InfrastructureCluster = &o
	}
	return d
}

func planObject(obj client.Object) plan.Object {
	return plan.Object{Name: obj.GetName(), Deleting: !obj.GetDeletionTimestamp().IsZero()}
}

func objectMeta(c *clusterv1.Cluster, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: c.Namespace, Name: name}
}
