package console

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

// ClusterSummary is one row of the fleet view: what a Cluster says about
// itself, read from the Cluster object alone so that a thousand of them
// cost no request to the API server.
type ClusterSummary struct {
	Namespace    string            `json:"namespace"`
	Name         string            `json:"name"`
	Labels       map[string]string `json:"labels"`
	Phase        string            `json:"phase"`
	Version      string            `json:"version"`
	Class        string            `json:"class"`
	Paused       bool              `json:"paused"`
	Available    ConditionState    `json:"available"`
	ControlPlane Counts            `json:"controlPlane"`
	Workers      Counts            `json:"workers"`
	// Problems are the conditions that are not in their good state, as
	// "Type: message".
	Problems  []string `json:"problems"`
	CreatedAt string   `json:"createdAt"`
	Deleting  bool     `json:"deleting"`
}

// ConditionState is a condition's status with its reason and message.
type ConditionState struct {
	Status  string `json:"status"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// Counts are replica counters; nil where the Cluster reports none.
type Counts struct {
	Desired  *int32 `json:"desired"`
	Ready    *int32 `json:"ready"`
	UpToDate *int32 `json:"upToDate"`
}

// goodWhenFalse are the condition types whose good state is False: they
// report something going on (a deletion, a pause, a rollout) rather than
// something that holds.
var goodWhenFalse = map[string]bool{
	clusterv1.DeletingCondition:    true,
	clusterv1.PausedCondition:      true,
	clusterv1.RollingOutCondition:  true,
	clusterv1.ScalingUpCondition:   true,
	clusterv1.ScalingDownCondition: true,
	clusterv1.RemediatingCondition: true,
	clusterv1.UpdatingCondition:    true,
}

// summarize makes the fleet row of c.
func summarize(c *clusterv1.Cluster) ClusterSummary {
	s := ClusterSummary{
		Namespace: c.Namespace,
		Name:      c.Name,
		Labels:    c.Labels,
		Phase:     c.Status.Phase,
		Class:     c.Spec.Topology.ClassRef.Name,
		Paused:    ptr.Deref(c.Spec.Paused, false),
		Available: ConditionState{Status: string(metav1.ConditionUnknown), Reason: "NotReported", Message: "the Cluster reports no Available condition yet"},
		Problems:  []string{},
		CreatedAt: c.CreationTimestamp.UTC().Format(time.RFC3339),
		Deleting:  !c.DeletionTimestamp.IsZero(),
	}
	if s.Labels == nil {
		s.Labels = map[string]string{}
	}
	s.Version = c.Spec.Topology.Version
	if cp := c.Status.ControlPlane; cp != nil {
		s.ControlPlane = Counts{Desired: cp.DesiredReplicas, Ready: cp.ReadyReplicas, UpToDate: cp.UpToDateReplicas}
		if s.Version == "" && len(cp.Versions) > 0 {
			s.Version = cp.Versions[0].Version
		}
	}
	if w := c.Status.Workers; w != nil {
		s.Workers = Counts{Desired: w.DesiredReplicas, Ready: w.ReadyReplicas, UpToDate: w.UpToDateReplicas}
	}
	polarity := map[string]bool{}
	for _, gate := range c.Spec.AvailabilityGates {
		polarity[gate.ConditionType] = gate.Polarity == clusterv1.NegativePolarityCondition
	}
	for _, cond := range c.Status.Conditions {
		if cond.Type == clusterv1.AvailableCondition {
			s.Available = ConditionState{Status: string(cond.Status), Reason: cond.Reason, Message: cond.Message}
		}
		negative, gated := polarity[cond.Type]
		if !gated {
			negative = goodWhenFalse[cond.Type]
		}
		good := metav1.ConditionTrue
		if negative {
			good = metav1.ConditionFalse
		}
		if cond.Status != good {
			problem := cond.Type
			if cond.Message != "" {
				problem += ": " + cond.Message
			} else if cond.Reason != "" {
				problem += ": " + cond.Reason
			}
			s.Problems = append(s.Problems, problem)
		}
	}
	return s
}
