package kubeadmconfig

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	bootstrapv1 "capstan.dev/capstan/api/bootstrap/kubeadm/v1beta2"
	"capstan.dev/capstan/internal/conditions"
)

// WaitingForDataSecretReason is DataSecretAvailable's reason before the
// controller has decided anything.
const WaitingForDataSecretReason = "WaitingForDataSecret"

// summarize sets the conditions and observedGeneration from what the
// reconcile learned; the deferred patch writes them once.
func summarize(s *scope) {
	if s.paused {
		return
	}
	cfg := s.config
	set := func(c metav1.Condition) { conditions.Set(cfg, c) }

	data := metav1.Condition{Type: bootstrapv1.DataSecretAvailableCondition}
	switch {
	case cfg.Status.DataSecretName != "":
		data.Status, data.Reason = metav1.ConditionTrue, bootstrapv1.AvailableReason
	case s.waitReason != "":
		data.Status, data.Reason, data.Message = metav1.ConditionFalse, s.waitReason, s.waitMessage
	case s.dataErr != nil:
		data.Status, data.Reason, data.Message = metav1.ConditionFalse, bootstrapv1.InternalErrorReason, s.dataErr.Error()
	default:
		data.Status, data.Reason, data.Message = metav1.ConditionFalse, WaitingForDataSecretReason, "the bootstrap data secret has not been written yet"
	}
	set(data)

	switch {
	case s.certs != nil && s.certs.ok:
		set(metav1.Condition{Type: bootstrapv1.CertificatesAvailableCondition, Status: metav1.ConditionTrue, Reason: bootstrapv1.AvailableReason})
	case s.certs != nil:
		set(metav1.Condition{Type: bootstrapv1.CertificatesAvailableCondition, Status: metav1.ConditionFalse, Reason: s.certs.reason, Message: s.certs.message})
	case conditions.Get(cfg, bootstrapv1.CertificatesAvailableCondition) != nil:
		// Decided by an earlier reconcile; nothing here changes it.
	case cfg.Status.DataSecretName != "":
		// Data adopted from the Machine: no certificates were needed.
		set(metav1.Condition{Type: bootstrapv1.CertificatesAvailableCondition, Status: metav1.ConditionTrue, Reason: bootstrapv1.AvailableReason})
	default:
		set(metav1.Condition{Type: bootstrapv1.CertificatesAvailableCondition, Status: metav1.ConditionUnknown, Reason: bootstrapv1.ReadyUnknownReason,
			Message: "the cluster certificates are looked up once the machine may init or join"})
	}

	var problems []string
	for _, t := range []string{bootstrapv1.DataSecretAvailableCondition, bootstrapv1.CertificatesAvailableCondition} {
		c := conditions.Get(cfg, t)
		if c == nil || c.Status != metav1.ConditionTrue {
			problems = append(problems, describe(c, t))
		}
	}
	if !cfg.DeletionTimestamp.IsZero() {
		problems = append(problems, "the KubeadmConfig is being deleted")
	}
	if len(problems) == 0 {
		set(metav1.Condition{Type: bootstrapv1.ReadyCondition, Status: metav1.ConditionTrue, Reason: bootstrapv1.ReadyReason})
	} else {
		set(metav1.Condition{Type: bootstrapv1.ReadyCondition, Status: metav1.ConditionFalse, Reason: bootstrapv1.NotReadyReason, Message: strings.Join(problems, "; ")})
	}
	cfg.Status.ObservedGeneration = cfg.Generation
}

func describe(c *metav1.Condition, t string) string {
	switch {
	case c == nil:
		return t + " is not reported"
	case c.Message != "":
		return t + ": " + c.Message
	default:
		return fmt.Sprintf("%s is %s (%s)", t, c.Status, c.Reason)
	}
}
