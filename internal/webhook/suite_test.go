package webhook_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"capstan.dev/capstan/internal/deploy"
	"capstan.dev/capstan/internal/manager"
	"capstan.dev/capstan/internal/testenv"
	"capstan.dev/capstan/internal/webhook"
	fx "capstan.dev/capstan/test/fixture"
)

var (
	env *testenv.Env
	// stopManager stops the running manager; tests that stop it start
	// another with startManager.
	mu          sync.Mutex
	stopManager func()
)

// lifetimes renew the authority every 20 seconds (the serving certificate
// follows it once the handoff is over), so that every test also runs across
// renewals of both.
var lifetimes = webhook.Lifetimes{
	CA: time.Hour, CARenewBefore: time.Hour - 20*time.Second,
	Serving: time.Hour, ServingRenewBefore: time.Hour - 4*time.Second,
}

// TestMain starts a management plane and Capstan's manager (every
// controller, and the webhooks on loopback as `capstan up` serves them).
func TestMain(m *testing.M) {
	e, err := testenv.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	env = e
	fx.SetLogger()
	code := func() int {
		if err := startManager(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer func() { stopManager() }()
		return m.Run()
	}()
	env.Stop()
	os.Exit(code)
}

// startManager starts a manager, with edit's changes to its options when
// given, and returns once its webhooks serve.
func startManager(edit ...func(*manager.Options)) error {
	mu.Lock()
	defer mu.Unlock()
	ready := make(chan struct{})
	o := manager.Options{MetricsAddr: "0", ProbeAddr: "0", AllowRestartInProcess: true,
		Webhook: &webhook.Options{BindAddress: "127.0.0.1:0", Namespace: deploy.Namespace, Lifetimes: lifetimes, Ready: func() { close(ready) }}}
	for _, e := range edit {
		e(&o)
	}
	mgr, err := manager.New(env.Config, o)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	select {
	case <-ready:
	case err := <-done:
		cancel()
		return fmt.Errorf("manager stopped before its webhooks served: %v", err)
	case <-time.After(time.Minute):
		cancel()
		return fmt.Errorf("webhooks did not serve within a minute")
	}
	stopManager = func() { cancel(); <-done }
	return nil
}
