package embedded

import (
	"context"
	"fmt"
	"net"
	"time"

	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	apiserverapp "k8s.io/kubernetes/cmd/kube-apiserver/app"
	apiserveroptions "k8s.io/kubernetes/cmd/kube-apiserver/app/options"
)

// RunAPIServer starts kube-apiserver with the given command-line flags on an
// already-bound listener (so the caller owns the choice of port and nothing
// can take it in between) and returns once readyCheck's identity gets 200
// from /readyz. The returned channel yields the server's exit error (nil on
// a clean shutdown, after in-flight requests drained) once ctx is cancelled,
// or earlier if the server fails.
func RunAPIServer(ctx context.Context, args []string, listener net.Listener, readyCheck *rest.Config) (<-chan error, error) {
	opts := apiserveroptions.NewServerRunOptions()
	fs := newFlagSet("kube-apiserver")
	for _, set := range opts.Flags().FlagSets {
		fs.AddFlagSet(set)
	}
	if err := parseFlags("kube-apiserver", fs, args); err != nil {
		return nil, err
	}
	opts.SecureServing.Listener = listener
	if err := opts.GenericServerRunOptions.ComponentGlobalsRegistry.Set(); err != nil {
		return nil, fmt.Errorf("kube-apiserver feature gates: %w", err)
	}
	rest.SetDefaultWarningHandler(rest.NoWarnings{})
	completed, err := opts.Complete(ctx)
	if err != nil {
		return nil, fmt.Errorf("kube-apiserver options: %w", err)
	}
	if errs := completed.Validate(); len(errs) > 0 {
		return nil, fmt.Errorf("kube-apiserver options: %w", utilerrors.NewAggregate(errs))
	}

	done := make(chan error, 1)
	go func() { done <- apiserverapp.Run(ctx, completed) }()

	check := rest.CopyConfig(readyCheck)
	if check.Timeout == 0 {
		check.Timeout = 5 * time.Second
	}
	client, err := kubernetes.NewForConfig(check)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		var status int
		res := client.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx).StatusCode(&status)
		if res.Error() == nil && status == 200 {
			return done, nil
		}
		select {
		case err := <-done:
			return nil, fmt.Errorf("kube-apiserver stopped during start-up: %w", err)
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("kube-apiserver on %s was not ready after 3 minutes: %v", listener.Addr(), res.Error())
		}
	}
}
