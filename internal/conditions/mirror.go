package conditions

import (
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

// NotDefinedReason says an optional reference is not set.
const NotDefinedReason = "NotDefined"

// Mirror reports on a provider object as a condition of condType on the
// object that references it: the provider's own condition mirrored when it
// reports one in the v1beta2 shape, otherwise one derived from the contract
// field that says the provider is done (done), worded with doneWord. obj is
// nil with a nil readErr when the object is gone.
func Mirror(condType string, ref clusterv1.ContractVersionedObjectReference, obj *unstructured.Unstructured, readErr error, done bool, mirrored, doneWord string) metav1.Condition {
	cond := metav1.Condition{Type: condType}
	switch {
	case !ref.IsDefined():
		cond.Status, cond.Reason = metav1.ConditionTrue, NotDefinedReason
		cond.Message = "no object is referenced"
	case apierrors.IsNotFound(readErr) || (readErr == nil && obj == nil):
		cond.Status, cond.Reason = metav1.ConditionFalse, clusterv1.ObjectDoesNotExistReason
		if done {
			cond.Reason = clusterv1.ObjectDeletedReason
		}
		cond.Message = fmt.Sprintf("%s %s does not exist", ref.Kind, ref.Name)
	case readErr != nil:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionUnknown, clusterv1.InspectionFailedReason, readErr.Error()
	case !obj.GetDeletionTimestamp().IsZero():
		cond.Status, cond.Reason = metav1.ConditionFalse, clusterv1.ObjectDeletedReason
		cond.Message = fmt.Sprintf("%s %s is being deleted", ref.Kind, ref.Name)
	default:
		if c := FromUnstructured(obj, mirrored); c != nil {
			cond.Status, cond.Reason, cond.Message = c.Status, c.Reason, c.Message
			if cond.Reason == "" {
				cond.Reason = string(c.Status)
			}
			return cond
		}
		if done {
			cond.Status, cond.Reason = metav1.ConditionTrue, clusterv1.ReadyReason
		} else {
			cond.Status, cond.Reason = metav1.ConditionFalse, clusterv1.NotReadyReason
			cond.Message = fmt.Sprintf("waiting for %s %s to report %s", ref.Kind, ref.Name, doneWord)
		}
	}
	return cond
}
