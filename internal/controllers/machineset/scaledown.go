package machineset

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/conditions"
	"capstan.dev/capstan/internal/kit"
	"capstan.dev/capstan/internal/plan"
)

// Reasons of a Machine's OwnerRemediated condition that the set writes, as
// Cluster API spells them.
const (
	CannotBeRemediatedReason  = "CannotBeRemediated"
	RemediationDeferredReason = "RemediationDeferred"
)

func isFalse(m *clusterv1.Machine, t string) bool {
	c := conditions.Get(m, t)
	return c != nil && c.Status == metav1.ConditionFalse
}

// toRemediate tells whether a MachineHealthCheck asked the set to replace m.
func toRemediate(m *clusterv1.Machine) bool { return isFalse(m, clusterv1.OwnerRemediatedCondition) }

// unhealthy tells whether a MachineHealthCheck found m unhealthy.
func unhealthy(m *clusterv1.Machine) bool {
	return isFalse(m, clusterv1.HealthCheckSucceededCondition) || toRemediate(m)
}

func (r *Reconciler) scaleDown(ctx context.Context, s *scope, n int) error {
	candidates := make([]plan.Machine, 0, len(s.machines))
	byName := map[string]*clusterv1.Machine{}
	for _, m := range s.machines {
		_, annotated := m.Annotations[clusterv1.DeleteMachineAnnotation]
		candidates = append(candidates, plan.Machine{
			Name:             m.Name,
			Created:          m.CreationTimestamp.Time,
			DeleteAnnotation: annotated,
			Unhealthy:        unhealthy(m),
			NotReady:         !conditions.IsTrue(m, clusterv1.ReadyCondition) || !conditions.IsTrue(m, clusterv1.AvailableCondition),
			Deleting:         !m.DeletionTimestamp.IsZero(),
		})
		byName[m.Name] = m
	}
	var doomed []*clusterv1.Machine
	for _, name := range plan.MachinesToDelete(candidates, n, s.ms.Spec.Deletion.Order) {
		doomed = append(doomed, byName[name])
	}
	return r.deleteMachines(ctx, s, doomed, "scaling down")
}

// deleteMachines deletes Machines and waits until the cache shows it, so
// that the next reconcile counts them as going.
func (r *Reconciler) deleteMachines(ctx context.Context, s *scope, machines []*clusterv1.Machine, why string) error {
	var errs []error
	var gone []*clusterv1.Machine
	for _, m := range machines {
		if !m.DeletionTimestamp.IsZero() {
			continue
		}
		if err := r.Client.Delete(ctx, m, client.Preconditions{UID: ptr.To(m.UID)}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting Machine %s: %w", m.Name, err))
			r.event(s.ms, m, "Warning", "FailedDelete", "Delete", "Failed to delete Machine %s (%s): %v", m.Name, why, err)
			continue
		}
		ctrl.LoggerFrom(ctx).Info("Deleted Machine", "Machine", m.Name, "why", why)
		r.event(s.ms, m, "Normal", "SuccessfulDelete", "Delete", "Deleted Machine %s (%s)", m.Name, why)
		// Counted as deleting from now on.
		m.DeletionTimestamp = ptr.To(metav1.NewTime(s.now))
		gone = append(gone, m)
	}
	errs = append(errs, kit.WaitForCache(ctx, r.Client, kit.Deleted, gone...))
	return kerrors.NewAggregate(errs)
}

// remediate deletes the Machines a MachineHealthCheck marked with
// OwnerRemediated=False; the scale-up then replaces them. A set of a
// MachineDeployment remediates only when it is the deployment's current
// revision, and no more Machines at a time than the deployment's
// spec.remediation.maxInFlight allows. Machines a health check finds healthy
// again lose the request.
func (r *Reconciler) remediate(ctx context.Context, s *scope) (time.Duration, error) {
	if !s.machinesRead {
		return 0, nil
	}
	var errs []error
	var candidates []*clusterv1.Machine
	inFlight := 0
	for _, m := range s.machines {
		switch {
		case !toRemediate(m):
		case !m.DeletionTimestamp.IsZero():
			inFlight++
		case conditions.IsTrue(m, clusterv1.HealthCheckSucceededCondition):
			err := r.patchMachineStatus(ctx, m, func(m *clusterv1.Machine) {
				meta.RemoveStatusCondition(&m.Status.Conditions, clusterv1.OwnerRemediatedCondition)
			})
			if err != nil {
				errs = append(errs, err)
			}
		default:
			candidates = append(candidates, m)
		}
	}
	if len(candidates) == 0 {
		return 0, kerrors.NewAggregate(errs)
	}

	mark := func(machines []*clusterv1.Machine, reason, message string) {
		for _, m := range machines {
			err := r.patchMachineStatus(ctx, m, func(m *clusterv1.Machine) {
				old := conditions.Get(m, clusterv1.OwnerRemediatedCondition)
				if old.Reason == reason && old.Message == message {
					return
				}
				old.Reason, old.Message = reason, message
			})
			if err != nil {
				errs = append(errs, err)
			}
		}
	}
	if s.md != nil && s.md.Annotations[clusterv1.RevisionAnnotation] != s.ms.Annotations[clusterv1.RevisionAnnotation] {
		mark(candidates, CannotBeRemediatedReason, "Machine won't be remediated because it is pending removal due to rollout")
		return 0, kerrors.NewAggregate(errs)
	}

	tokens := math.MaxInt
	var limit string
	if s.md != nil && s.md.Spec.Remediation.MaxInFlight != nil {
		v := s.md.Spec.Remediation.MaxInFlight
		n, err := intstr.GetScaledValueFromIntOrPercent(v, int(ptr.Deref(s.md.Spec.Replicas, 1)), true)
		if err != nil {
			return 0, kerrors.NewAggregate(append(errs, fmt.Errorf("MachineDeployment %s spec.remediation.maxInFlight: %w", s.md.Name, err)))
		}
		tokens, limit = n-inFlight, v.String()
	}
	// The annotated first, then the newest: a Machine that never came up
	// hosts the least.
	slices.SortStableFunc(candidates, func(a, b *clusterv1.Machine) int {
		_, aa := a.Annotations[clusterv1.RemediateMachineAnnotation]
		_, ba := b.Annotations[clusterv1.RemediateMachineAnnotation]
		if aa != ba {
			if aa {
				return -1
			}
			return 1
		}
		if c := b.CreationTimestamp.Compare(a.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	now := candidates
	if tokens < len(candidates) {
		now = candidates[:max(tokens, 0)]
		mark(candidates[len(now):], RemediationDeferredReason,
			fmt.Sprintf("Waiting because there are already too many remediations in progress (spec.remediation.maxInFlight is %s)", limit))
	}
	errs = append(errs, r.deleteMachines(ctx, s, now, "remediating an unhealthy Machine"))
	return 0, kerrors.NewAggregate(errs)
}
