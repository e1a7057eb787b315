package clusterclass

import (
	"errors"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

func TestRefVersionsCondition(t *testing.T) {
	for _, tc := range []struct {
		name       string
		checked    bool
		outdated   []outdatedRef
		errs       []error
		status     metav1.ConditionStatus
		reason     string
		inMessages []string
	}{
		{name: "all current", checked: true, status: metav1.ConditionTrue, reason: clusterv1.ClusterClassRefVersionsUpToDateReason},
		{name: "one behind", checked: true,
			outdated: []outdatedRef{{field: "spec.infrastructure.templateRef", kind: "LocalClusterTemplate", name: "lc", version: "v1beta1", current: "v1beta2"}},
			status:   metav1.ConditionFalse, reason: clusterv1.ClusterClassRefVersionsNotUpToDateReason,
			inMessages: []string{"* LocalClusterTemplate lc (spec.infrastructure.templateRef): v1beta1, current v1beta2", "set apiVersion to the current one"}},
		{name: "unresolvable", errs: []error{errors.New("spec.controlPlane.templateRef: kind X of group g is not installed")},
			status: metav1.ConditionUnknown, reason: clusterv1.ClusterClassRefVersionsUpToDateInternalErrorReason,
			inMessages: []string{"* spec.controlPlane.templateRef: kind X of group g is not installed"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := refVersionsCondition(tc.checked, tc.outdated, tc.errs)
			if c.Type != clusterv1.ClusterClassRefVersionsUpToDateCondition || c.Status != tc.status || c.Reason != tc.reason {
				t.Fatalf("condition %s=%s (%s), want %s (%s)", c.Type, c.Status, c.Reason, tc.status, tc.reason)
			}
			for _, want := range tc.inMessages {
				if !strings.Contains(c.Message, want) {
					t.Errorf("message %q lacks %q", c.Message, want)
				}
			}
		})
	}
}

func TestVariablesCondition(t *testing.T) {
	if c := variablesCondition(nil); c.Status != metav1.ConditionTrue || c.Reason != clusterv1.ClusterClassVariablesReadyReason {
		t.Fatalf("valid definitions: %+v", c)
	}
	c := variablesCondition(field.ErrorList{field.Invalid(field.NewPath("spec", "variables").Index(1).Child("schema", "openAPIV3Schema", "type"), "strin", "unknown type")})
	if c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "spec.variables[1].schema.openAPIV3Schema.type") {
		t.Fatalf("a broken definition: %+v", c)
	}
}
