package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"

	"capstan.dev/capstan/internal/certs"
	"capstan.dev/capstan/internal/node/cloudinit"
	"capstan.dev/capstan/internal/node/controlplane"
	"capstan.dev/capstan/internal/providers/local/machinedir"
)

// Options configure Run.
type Options struct {
	// Dir is the machine directory (machine.json, bootstrap-data, ...).
	Dir string
	Log logr.Logger
	// ShutdownTimeout bounds the graceful stop after a signal (default 30s).
	ShutdownTimeout time.Duration
}

// agent is one run of a machine.
type agent struct {
	dir, root string
	m         machinedir.Machine
	log       logr.Logger
	st        *state

	mu     sync.Mutex
	status machinedir.Status

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

// Run boots the machine in opts.Dir and keeps it running until ctx ends
// (SIGTERM/SIGINT in `capstan node run`), then stops it gracefully and
// returns nil. It returns an error, after writing status Failed, when the
// machine cannot boot or a component fails.
func Run(ctx context.Context, opts Options) (err error) {
	if opts.ShutdownTimeout == 0 {
		opts.ShutdownTimeout = 30 * time.Second
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return err
	}
	m, err := machinedir.ReadMachine(dir)
	if err != nil {
		return err
	}
	lk, err := takeLock(dir)
	if err != nil {
		return err
	}
	defer lk.Release()

	a := &agent{
		dir: dir, root: filepath.Join(dir, machinedir.RootFS), m: m,
		log:   opts.Log.WithValues("machine", m.Machine, "cluster", m.Cluster),
		fatal: make(chan error, 4),
	}
	// A stale endpoint from a killed process would send traffic nowhere.
	a.removeEndpoint()
	a.setStatus(func(s *machinedir.Status) { s.Phase, s.Message = machinedir.PhaseBooting, "" })

	defer func() {
		if err != nil {
			a.setStatus(func(s *machinedir.Status) { s.Phase, s.Message = machinedir.PhaseFailed, err.Error() })
		}
	}()

	if a.st, err = loadState(a.root); err != nil {
		return err
	}
	stopAll := func() {
		sctx, cancel := context.WithTimeout(context.Background(), opts.ShutdownTimeout)
		defer cancel()
		a.shutdown(sctx)
	}

	if a.st.Started {
		a.log.Info("Restarting the components of an initialised machine", "role", a.st.Role, "node", a.st.NodeName)
		if err := a.resume(ctx); err != nil {
			stopAll()
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("restarting the machine's components: %w", err)
		}
	}

	if err := a.bootstrap(ctx); err != nil {
		stopAll()
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	a.setStatus(func(s *machinedir.Status) { s.Phase, s.Message = machinedir.PhaseRunning, "" })
	a.log.Info("Machine running", "node", a.st.NodeName, "role", a.st.Role)

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
	stopAll()
	if fatal != nil {
		return fatal
	}
	a.log.Info("Machine stopped")
	return nil
}

func (a *agent) cpDone() <-chan error {
	if a.cp == nil {
		return nil
	}
	return a.cp.Done()
}

// bootstrap applies the bootstrap data; the Runner's Init and Join start
// the components.
func (a *agent) bootstrap(ctx context.Context) error {
	data, err := os.ReadFile(filepath.Join(a.dir, machinedir.BootstrapDataFile))
	if err != nil {
		return fmt.Errorf("reading the bootstrap data: %w (the local provider writes %s once the bootstrap provider produced it)", err, machinedir.BootstrapDataFile)
	}
	cfg, err := cloudinit.Parse(data)
	if err != nil {
		return fmt.Errorf("bootstrap data: %w", err)
	}
	steps, err := cloudinit.Plan(cfg, cloudinit.Options{Root: a.root, Hostname: a.m.Hostname})
	if err != nil {
		return fmt.Errorf("bootstrap data: %w", err)
	}
	runner := &Runner{Root: a.root, Init: a.kubeadmInit, Join: a.kubeadmJoin, Log: a.log}
	rep, applyErr := cloudinit.Apply(ctx, steps, runner)
	bs := &machinedir.BootstrapStatus{Complete: rep.Complete}
	for _, e := range rep.Entries {
		switch e.Outcome {
		case cloudinit.Skipped:
			msg := e.Source + ": " + e.Action
			if e.Detail != "" && !strings.Contains(e.Action, e.Detail) {
				msg += ": " + e.Detail
			}
			bs.Skipped = append(bs.Skipped, msg)
			a.log.Info("Bootstrap step skipped", "source", e.Source, "reason", e.Detail)
		case cloudinit.Failed:
			bs.Failed = e.Source + ": " + e.Action
			if e.Err != nil {
				bs.Failed += ": " + e.Err.Error()
			}
		}
	}
	a.log.V(1).Info("Bootstrap report", "report", rep.String())
	a.setStatus(func(s *machinedir.Status) { s.Bootstrap = bs })
	if applyErr != nil {
		return fmt.Errorf("bootstrap: %w", applyErr)
	}
	if !rep.Complete {
		if bs.Failed != "" {
			return fmt.Errorf("bootstrap failed at %s", bs.Failed)
		}
		return errors.New("bootstrap did not complete")
	}
	return nil
}

// setStatus changes the status and writes it; a failed write is logged
// only, since the machine itself is fine.
func (a *agent) setStatus(change func(*machinedir.Status)) {
	a.mu.Lock()
	defer a.mu.Unlock()
	before := a.status
	change(&a.status)
	a.status.PID = os.Getpid()
	if a.st != nil && a.st.NodeName != "" {
		a.status.NodeName = a.st.NodeName
	}
	if a.status.Phase != before.Phase || a.status.Since.IsZero() {
		a.status.Since = time.Now().UTC().Truncate(time.Second)
	}
	if err := machinedir.WriteStatus(a.dir, a.status); err != nil {
		a.log.Error(err, "Writing status.json")
	}
}

func (a *agent) endpointPath() string { return filepath.Join(a.dir, machinedir.APIServerEndpointFile) }

func (a *agent) removeEndpoint() {
	if err := os.Remove(a.endpointPath()); err != nil && !errors.Is(err, os.ErrNotExist) {
		a.log.Error(err, "Removing apiserver-endpoint")
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
	}
}
