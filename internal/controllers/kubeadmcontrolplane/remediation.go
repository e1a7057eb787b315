package kubeadmcontrolplane

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	controlplanev1 "capstan.dev/capstan/api/controlplane/kubeadm/v1beta2"
	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/conditions"
	"capstan.dev/capstan/internal/plan"
)

// remediationData is what the remediation annotations hold: which Machine
// was remediated, when, and how many remediations in a row its failure has
// had. It travels from the control plane (remediation in progress) to the
// replacement Machine (remediation for).
type remediationData struct {
	Machine    string      `json:"machine"`
	Timestamp  metav1.Time `json:"timestamp"`
	RetryCount int         `json:"retryCount"`
}

func parseRemediationData(s string) (remediationData, bool) {
	var d remediationData
	if s == "" || json.Unmarshal([]byte(s), &d) != nil {
		return d, false
	}
	return d, true
}

// remediationParams are the spec's remediation limits for the planner.
func remediationParams(s *scope) plan.ControlPlaneRemediation {
	spec := s.kcp.Spec.Remediation
	r := plan.ControlPlaneRemediation{
		RetryPeriod: time.Duration(ptr.Deref(spec.RetryPeriodSeconds, 0)) * time.Second,
		Last:        s.kcp.Status.LastRemediation.Time.Time,
		Now:         s.now,
	}
	if spec.MaxRetry != nil {
		r.MaxRetry = ptr.To(int(*spec.MaxRetry))
	}
	return r
}

// remediationRetry is how many remediations in a row m's failure makes: a
// replacement that fails within the minimum healthy period continues its
// predecessor's count.
func remediationRetry(s *scope, m *clusterv1.Machine) int {
	d, ok := parseRemediationData(m.Annotations[controlplanev1.RemediationForAnnotation])
	if !ok {
		return 0
	}
	minHealthy := time.Duration(ptr.Deref(s.kcp.Spec.Remediation.MinHealthyPeriodSeconds, controlplanev1.DefaultMinHealthyPeriodSeconds)) * time.Second
	if s.now.After(m.CreationTimestamp.Add(minHealthy)) {
		return 0
	}
	return d.RetryCount + 1
}

func needsRemediation(m *clusterv1.Machine) bool {
	c := conditions.Get(m, clusterv1.OwnerRemediatedCondition)
	return c != nil && c.Status == metav1.ConditionFalse
}

// remediate deletes the unhealthy Machine the planner chose and records it:
// in status.lastRemediation, and in the in-progress annotation that the
// replacement inherits.
func (r *Reconciler) remediate(ctx context.Context, s *scope, m *machineState) error {
	retry := remediationRetry(s, m.machine)
	data, err := json.Marshal(remediationData{Machine: m.machine.Name, Timestamp: metav1.NewTime(s.now.Truncate(time.Second)), RetryCount: retry})
	if err != nil {
		return err
	}
	if err := r.Client.Delete(ctx, m.machine, client.Preconditions{UID: ptr.To(m.machine.UID)}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting unhealthy Machine %s: %w", m.machine.Name, err)
	}
	if s.kcp.Annotations == nil {
		s.kcp.Annotations = map[string]string{}
	}
	s.kcp.Annotations[controlplanev1.RemediationInProgressAnnotation] = string(data)
	s.kcp.Status.LastRemediation = controlplanev1.LastRemediationStatus{
		Machine: m.machine.Name, Time: metav1.NewTime(s.now.Truncate(time.Second)), RetryCount: ptr.To(int32(retry)),
	}
	m.machine.DeletionTimestamp = &metav1.Time{Time: s.now}
	ctrllog.FromContext(ctx).Info("Remediating unhealthy control-plane Machine", "Machine", m.machine.Name, "retry", retry)
	r.event(s.kcp, m.machine, "Normal", "Remediating", "Remediate", "Deleting unhealthy Machine %s (remediation %d in a row); a new Machine replaces it", m.machine.Name, retry+1)
	return nil
}

// remediatingCondition says whether Machines wait for remediation and what
// happens to them.
func remediatingCondition(s *scope) metav1.Condition {
	var waiting []string
	for _, m := range s.machines {
		if needsRemediation(m.machine) && m.machine.DeletionTimestamp.IsZero() {
			waiting = append(waiting, m.machine.Name)
		}
	}
	if len(waiting) == 0 {
		if _, ok := s.kcp.Annotations[controlplanev1.RemediationInProgressAnnotation]; ok {
			return metav1.Condition{Type: controlplanev1.KubeadmControlPlaneRemediatingCondition, Status: metav1.ConditionTrue, Reason: clusterv1.RemediatingReason,
				Message: "waiting for the replacement of the remediated Machine " + s.kcp.Status.LastRemediation.Machine}
		}
		return metav1.Condition{Type: controlplanev1.KubeadmControlPlaneRemediatingCondition, Status: metav1.ConditionFalse, Reason: clusterv1.NotRemediatingReason}
	}
	msg := fmt.Sprintf("%d Machines need remediation: %v", len(waiting), waiting)
	if s.action.Remediating && s.action.Reason != "" {
		msg += "; " + s.action.Reason
	}
	return metav1.Condition{Type: controlplanev1.KubeadmControlPlaneRemediatingCondition, Status: metav1.ConditionTrue, Reason: clusterv1.RemediatingReason, Message: msg}
}
