package mgmt

import (
	"context"

	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"capstan.dev/capstan/internal/embedded"
)

// controllerArgs are the kube-controller-manager flags of the plane's
// controllers:
//   - namespace: empties and removes deleted namespaces;
//   - garbage collector: deletes dependents whose owners are gone, which is
//     how owner-reference cascades (foreground and background) happen;
//   - service accounts and their legacy token secrets;
//   - cluster role aggregation, which providers rely on to grant the manager
//     access to their kinds.
//
// One plane runs per state directory, so there is nothing to elect.
func controllerArgs(p pki) []string {
	return []string{
		"--controllers=namespace,garbagecollector,serviceaccount,serviceaccount-token,clusterrole-aggregation",
		"--leader-elect=false",
		// These controllers make bursts of deletes when a namespace goes; a
		// management plane on loopback can take them.
		"--kube-api-qps=200",
		"--kube-api-burst=400",
		"--service-account-private-key-file=" + p.serviceAccountKey(),
		"--root-ca-file=" + p.caCert(),
	}
}

// runControllers starts the plane's kube-controller-manager controllers and
// returns a function that waits for them to stop after ctx is cancelled.
func runControllers(ctx context.Context, cfg *rest.Config, p pki) (wait func(), err error) {
	cm, err := embedded.StartControllerManager(ctx, embedded.ControllerManagerConfig{
		Client: cfg,
		Args:   controllerArgs(p),
		Log:    klog.FromContext(ctx),
	})
	if err != nil {
		return nil, err
	}
	return cm.Wait, nil
}
