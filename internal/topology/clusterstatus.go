package topology

import (
	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/patch"
)

// A topology Cluster's status has two writers: the topology controller
// reports the TopologyReconciled condition and the upgrade plans, the
// Cluster controller everything else. Each applies only its part (see
// patch.OwnedStatus), so their writes neither conflict nor set back the
// other's. The two functions below are that split, kept in one place so the
// halves cannot drift apart. Both take the status as JSON and may change it.

// upgradePlanParents are the status fields whose upgradePlan the topology
// controller reports.
var upgradePlanParents = []string{"controlPlane", "workers"}

// TopologyStatus keeps the topology controller's part of a Cluster's status.
func TopologyStatus(status map[string]any) map[string]any {
	patch.KeepConditions(status, func(t string) bool { return t == clusterv1.ClusterTopologyReconciledCondition })
	own := map[string]any{"conditions": status["conditions"]}
	for _, parent := range upgradePlanParents {
		if p, ok := status[parent].(map[string]any); ok && p["upgradePlan"] != nil {
			own[parent] = map[string]any{"upgradePlan": p["upgradePlan"]}
		}
	}
	return own
}

// StatusWithoutTopology drops the topology controller's part of a Cluster's
// status.
func StatusWithoutTopology(status map[string]any) map[string]any {
	patch.KeepConditions(status, func(t string) bool { return t != clusterv1.ClusterTopologyReconciledCondition })
	for _, parent := range upgradePlanParents {
		if p, ok := status[parent].(map[string]any); ok {
			delete(p, "upgradePlan")
		}
	}
	return status
}
