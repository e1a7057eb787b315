package clusterclass_test

import (
	"context"
	"testing"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	"capstan.dev/capstan/internal/contract"
	"capstan.dev/capstan/internal/controllers/clusterclass"
	"capstan.dev/capstan/internal/testenv"
	fx "capstan.dev/capstan/test/fixture"
)

var env *testenv.Env

// TestMain starts a management plane and a manager that runs the
// ClusterClass controller alone.
func TestMain(m *testing.M) {
	fx.MainWithManager(m, &env, func(ctx context.Context, mgr ctrl.Manager) error {
		r := &clusterclass.Reconciler{Client: mgr.GetClient(), Resolver: &contract.Resolver{Reader: mgr.GetClient()}}
		return r.SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: 2})
	})
}
