package clusterclass_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"capstan.dev/capstan/internal/contract"
	"capstan.dev/capstan/internal/controllers/clusterclass"
	"capstan.dev/capstan/internal/scheme"
	"capstan.dev/capstan/internal/testenv"
	fx "capstan.dev/capstan/test/fixture"
)

var env *testenv.Env

// TestMain starts a management plane and a manager that runs the
// ClusterClass controller alone.
func TestMain(m *testing.M) {
	e, err := testenv.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	env = e
	fx.SetLogger()
	ctx, cancel := context.WithCancel(context.Background())
	code := func() int {
		mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
			Scheme:                 scheme.New(),
			Metrics:                metricsserver.Options{BindAddress: "0"},
			HealthProbeBindAddress: "0",
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		r := &clusterclass.Reconciler{Client: mgr.GetClient(), Resolver: &contract.Resolver{Reader: mgr.GetClient()}}
		if err := r.SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: 2}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		go func() {
			if err := mgr.Start(ctx); err != nil {
				fmt.Fprintln(os.Stderr, "manager:", err)
			}
		}()
		return m.Run()
	}()
	cancel()
	env.Stop()
	os.Exit(code)
}
