package clusterclass

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/conditions"
)

// outdatedRef is a template reference whose apiVersion is behind the
// version its CRD's contract label names.
type outdatedRef struct {
	field, kind, name string
	version, current  string
}

// updateStatus turns what the reconcile learned into the class's status.
func updateStatus(s *scope) {
	if s.paused || !s.cc.DeletionTimestamp.IsZero() {
		return
	}
	cc := s.cc
	conditions.Set(cc, refVersionsCondition(s.refsChecked, s.outdated, s.refErrs))
	if s.variablesChecked {
		conditions.Set(cc, variablesCondition(s.variableErrs))
		if len(s.variableErrs) == 0 {
			cc.Status.Variables = s.variables
		}
	}
	cc.Status.ObservedGeneration = cc.Generation
}

// refVersionsCondition is RefVersionsUpToDate: Unknown while a reference
// cannot be resolved (the message says which and why), False naming every
// reference that is behind and the version to move it to, True otherwise.
func refVersionsCondition(checked bool, outdated []outdatedRef, errs []error) metav1.Condition {
	c := metav1.Condition{Type: clusterv1.ClusterClassRefVersionsUpToDateCondition}
	if !checked {
		msgs := make([]string, 0, len(errs))
		for _, err := range errs {
			msgs = append(msgs, "* "+err.Error())
		}
		c.Status, c.Reason = metav1.ConditionUnknown, clusterv1.ClusterClassRefVersionsUpToDateInternalErrorReason
		c.Message = "Template references could not be checked:\n" + strings.Join(msgs, "\n")
		return c
	}
	if len(outdated) == 0 {
		c.Status, c.Reason = metav1.ConditionTrue, clusterv1.ClusterClassRefVersionsUpToDateReason
		return c
	}
	lines := []string{"Template references behind the version their provider's contract label names (set apiVersion to the current one):"}
	for _, o := range outdated {
		lines = append(lines, fmt.Sprintf("* %s %s (%s): %s, current %s", o.kind, o.name, o.field, o.version, o.current))
	}
	c.Status, c.Reason, c.Message = metav1.ConditionFalse, clusterv1.ClusterClassRefVersionsNotUpToDateReason, strings.Join(lines, "\n")
	return c
}

// variablesCondition is VariablesReady: True when every definition is
// valid, False naming the broken ones.
func variablesCondition(errs field.ErrorList) metav1.Condition {
	if len(errs) == 0 {
		return metav1.Condition{Type: clusterv1.ClusterClassVariablesReadyCondition, Status: metav1.ConditionTrue, Reason: clusterv1.ClusterClassVariablesReadyReason}
	}
	msgs := make([]string, 0, len(errs))
	for _, e := range errs {
		msgs = append(msgs, "* "+e.Error())
	}
	return metav1.Condition{Type: clusterv1.ClusterClassVariablesReadyCondition, Status: metav1.ConditionFalse,
		Reason:  clusterv1.ClusterClassVariablesReadyVariableDiscoveryFailedReason,
		Message: "Variable definitions are not valid:\n" + strings.Join(msgs, "\n")}
}
