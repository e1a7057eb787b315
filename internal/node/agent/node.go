package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"

	"capstan.dev/capstan/internal/certs"
	"capstan.dev/capstan/internal/node/controlplane"
	"capstan.dev/capstan/internal/providers/local/machinedir"
)

// Reporter is told what the machine does: the local provider's reporter is
// the machine directory (status.json and apiserver-endpoint).
type Reporter interface {
	// Status applies change to the machine's status and publishes it.
	Status(change func(*machinedir.Status)) error
	// APIServer says where this machine's API server serves (host:port),
	// or "" once it stopped serving or leaves the load balancer.
	APIServer(address string) error
}

// Identity is what the machine knows of itself before kubeadm runs.
type Identity struct {
	// Hostname names the node when the kubeadm configuration does not.
	Hostname string
	// ProviderID is the Node's spec.providerID when the kubelet's
	// provider-id extra argument does not set one.
	ProviderID string
	// Version is the kubelet version the Node reports.
	Version string
}

// nodeOptions make an agent.
type nodeOptions struct {
	// Root is the machine's "/", a directory on the host.
	Root string
	// LocalDir is the local provider's directory the machine is one of;
	// its kubelet runs Capstan's manager for that directory, and only it,
	// as a process (kubelet.Options.LocalDir).
	LocalDir string
	Identity Identity
	// Report receives the machine's status; nil reports nothing.
	Report Reporter
	Log    logr.Logger
}

// agent is one run of a machine: kubeadm init and join performed on its
// root, the restart of what it became, and the components it runs.
type agent struct {
	root     string
	localDir string
	id       Identity
	log      logr.Logger
	reporter Reporter
	st       *state

	cp *controlplane.ControlPlane
	// endpoint is the cluster's control-plane endpoint (host:port), when
	// the kubeadm configuration names one.
	endpoint string
	// keyAlgorithm is the cluster's encryptionAlgorithm, known once the
	// control plane has started from the ClusterConfiguration; the
	// control-plane kubelet's credential is minted with it.
	keyAlgorithm certs.KeyAlgorithm
	// kubelet runs under its own context so that it stops before the
	// control plane on shutdown.
	kubeletCancel context.CancelFunc
	kubeletDone   chan struct{}
	// fatal receives the first error of a component that stopped on its own.
	fatal chan error
}

// newAgent reads what the machine under o.Root became, if anything.
func newAgent(o nodeOptions) (*agent, error) {
	if o.Report == nil {
		o.Report = noReport{}
	}
	st, err := loadState(o.Root)
	if err != nil {
		return nil, err
	}
	return &agent{
		root: o.Root, localDir: o.LocalDir, id: o.Identity, log: o.Log, reporter: o.Report, st: st,
		fatal: make(chan error, 4),
	}, nil
}

// restart starts the components of an initialised machine from what it
// saved, without initialising anything again.
func (a *agent) restart(ctx context.Context) error {
	a.log.Info("Restarting the components of an initialised machine", "role", a.st.Role, "node", a.st.NodeName)
	if err := a.resume(ctx); err != nil {
		return fmt.Errorf("restarting the machine's components: %w", err)
	}
	return nil
}

// wait keeps the components running until ctx ends (nil) or one of them
// stops on its own (its error), then stops them all within timeout.
func (a *agent) wait(ctx context.Context, timeout time.Duration) error {
	var fatal error
	select {
	case <-ctx.Done():
		a.log.Info("Stopping the machine")
	case fatal = <-a.fatal:
		a.log.Error(fatal, "A machine component stopped; shutting the machine down")
	case fatal = <-a.cpDone():
		if fatal == nil {
			fatal = errors.New("the control plane stopped")
		}
		a.log.Error(fatal, "The control plane stopped; shutting the machine down")
	}
	a.stop(timeout)
	if fatal != nil {
		return fatal
	}
	a.log.Info("Machine stopped")
	return nil
}

// stop stops what runs, waiting at most timeout.
func (a *agent) stop(timeout time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	a.shutdown(ctx)
}

func (a *agent) cpDone() <-chan error {
	if a.cp == nil {
		return nil
	}
	return a.cp.Done()
}

// setStatus reports a status change; a failed report is logged only, since
// the machine itself is fine.
func (a *agent) setStatus(change func(*machinedir.Status)) {
	err := a.reporter.Status(func(s *machinedir.Status) {
		change(s)
		if a.st != nil && a.st.NodeName != "" {
			s.NodeName = a.st.NodeName
		}
	})
	if err != nil {
		a.log.Error(err, "Reporting the machine's status")
	}
}

func (a *agent) publishEndpoint() error {
	return a.reporter.APIServer(a.apiServerAddress())
}

func (a *agent) removeEndpoint() {
	if err := a.reporter.APIServer(""); err != nil {
		a.log.Error(err, "Withdrawing the API server endpoint")
	}
}

// shutdown stops what runs, in the order that disturbs the cluster least:
// leave the load balancer, stop the kubelet, then the control plane.
func (a *agent) shutdown(ctx context.Context) {
	a.removeEndpoint()
	if a.kubeletCancel != nil {
		a.kubeletCancel()
		select {
		case <-a.kubeletDone:
		case <-ctx.Done():
			a.log.Info("The kubelet did not stop in time")
		}
		a.kubeletCancel = nil
	}
	if a.cp != nil {
		// An etcd member that lost its quorum can block its stop; the
		// process exits anyway, which ends everything it runs.
		stopped := make(chan struct{})
		go func() { a.cp.Stop(); close(stopped) }()
		select {
		case <-stopped:
		case <-ctx.Done():
			a.log.Info("The control plane did not stop in time; exiting without waiting")
		}
		a.cp = nil
	}
}

// noReport is the Reporter of a machine nobody watches.
type noReport struct{}

func (noReport) Status(func(*machinedir.Status)) error { return nil }
func (noReport) APIServer(string) error                { return nil }
