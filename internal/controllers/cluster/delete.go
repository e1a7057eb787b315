package cluster

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"
)

func (r *Reconciler) reconcileDelete(ctx context.Context, s *scope) (ctrl.Result, error) {
	return ctrl.Result{}, nil
}
