package mgmt

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/spf13/pflag"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	apiserverapp "k8s.io/kubernetes/cmd/kube-apiserver/app"
	apiserveroptions "k8s.io/kubernetes/cmd/kube-apiserver/app/options"
)

// serviceAccountIssuer is the issuer of the service account tokens the plane
// signs. It is fixed: tokens issued before a restart stay valid after it.
const serviceAccountIssuer = "https://kubernetes.default.svc.cluster.local"

// apiServerArgs are the kube-apiserver flags of the embedded plane, spelled
// as a user of kube-apiserver would write them; passing them through the
// server's own flag set keeps every default the server documents.
func apiServerArgs(dir StateDir, ports Ports) []string {
	p := dir.pki()
	return []string{
		"--etcd-servers=https://127.0.0.1:" + strconv.Itoa(ports.EtcdClient),
		"--etcd-cafile=" + p.caCert(),
		"--etcd-certfile=" + p.certFile(etcdClient),
		"--etcd-keyfile=" + p.keyFile(etcdClient),
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(ports.APIServer),
		"--cert-dir=" + dir.apiserverDir(),
		"--tls-cert-file=" + p.certFile(apiServerServing),
		"--tls-private-key-file=" + p.keyFile(apiServerServing),
		"--client-ca-file=" + p.caCert(),
		"--service-account-issuer=" + serviceAccountIssuer,
		"--service-account-key-file=" + p.serviceAccountPub(),
		"--service-account-signing-key-file=" + p.serviceAccountKey(),
		"--authorization-mode=RBAC",
		"--service-cluster-ip-range=10.96.0.0/12",
		// The plane serves on loopback only; there is no Service network
		// behind it for the kubernetes Service's endpoints to point at.
		"--endpoint-reconciler-type=none",
		"--profiling=false",
	}
}

// runAPIServer starts kube-apiserver on the given, already-bound listener and
// returns once it answers /readyz. The returned channel yields the server's
// exit error (nil on a clean shutdown) after ctx is cancelled.
func runAPIServer(ctx context.Context, dir StateDir, ports Ports, listener net.Listener, admin *rest.Config) (<-chan error, error) {
	opts := apiserveroptions.NewServerRunOptions()
	fs := pflag.NewFlagSet("kube-apiserver", pflag.ContinueOnError)
	for _, set := range opts.Flags().FlagSets {
		fs.AddFlagSet(set)
	}
	if err := fs.Parse(apiServerArgs(dir, ports)); err != nil {
		return nil, fmt.Errorf("kube-apiserver flags: %w", err)
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

	client, err := kubernetes.NewForConfig(admin)
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
			return nil, fmt.Errorf("kube-apiserver on port %d was not ready after 3 minutes: %v", ports.APIServer, res.Error())
		}
	}
}
