package clustertopology

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/conditions"
	"capstan.dev/capstan/internal/plan"
)

// reconcileSucceededReason is TopologyReconciled's reason when every object
// matches the topology (upstream's value).
const reconcileSucceededReason = "ReconcileSucceeded"

// report sets what the topology owns of the Cluster's status: the
// TopologyReconciled condition and the upgrade plans. The Cluster
// controller writes the rest of the status; each patch carries only the
// fields its writer changed.
func (r *Reconciler) report(s *scope) {
	c := s.cluster
	cond := metav1.Condition{Type: clusterv1.ClusterTopologyReconciledCondition, Status: metav1.ConditionFalse}
	switch {
	case s.paused:
		cond.Reason, cond.Message = clusterv1.PausedReason, s.pauseWhy
	case !c.DeletionTimestamp.IsZero():
		cond.Reason, cond.Message = clusterv1.DeletingReason, "Cluster is being deleted: "+s.deleting
	case s.err != nil:
		cond.Reason, cond.Message = clusterv1.ClusterTopologyReconciledFailedReason, s.err.Error()
	case s.notReady != "":
		cond.Reason, cond.Message = s.notReadyReason, s.notReady
	case s.state == nil:
		return
	case s.state.Upgrade.Reason != "":
		cond.Reason, cond.Message = s.state.Upgrade.Reason, s.state.Upgrade.Message
	default:
		cond.Status, cond.Reason = metav1.ConditionTrue, reconcileSucceededReason
	}
	conditions.Set(c, cond)
	if s.state != nil && s.err == nil {
		setUpgradePlans(c, s)
	}
}

// setUpgradePlans reports the versions still ahead of the control plane and
// of the workers, as the upgrade decision left them.
func setUpgradePlans(c *clusterv1.Cluster, s *scope) {
	cpPlan := plan.StatusUpgradePlan(s.state.Upgrade.ControlPlaneUpgradePlan)
	workersPlan := plan.StatusUpgradePlan(s.state.Upgrade.WorkersUpgradePlan)
	if cpPlan != nil || (c.Status.ControlPlane != nil && c.Status.ControlPlane.UpgradePlan != nil) {
		if c.Status.ControlPlane == nil {
			c.Status.ControlPlane = &clusterv1.ClusterControlPlaneStatus{}
		}
		c.Status.ControlPlane.UpgradePlan = cpPlan
	}
	if workersPlan != nil || (c.Status.Workers != nil && c.Status.Workers.UpgradePlan != nil) {
		if c.Status.Workers == nil {
			c.Status.Workers = &clusterv1.WorkersStatus{}
		}
		c.Status.Workers.UpgradePlan = workersPlan
	}
}
