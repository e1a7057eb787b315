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

	"capstan.dev/capstan/internal/atomicfile"
	"capstan.dev/capstan/internal/node/cloudinit"
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

	rep := &dirReporter{dir: dir}
	// A stale endpoint from a killed process would send traffic nowhere.
	_ = rep.removeEndpoint()
	_ = rep.setStatus(func(s *machinedir.Status) { s.Phase, s.Message = machinedir.PhaseBooting, "" })
	defer func() {
		if err != nil {
			_ = rep.setStatus(func(s *machinedir.Status) { s.Phase, s.Message = machinedir.PhaseFailed, err.Error() })
		}
	}()
	// Outside the provider's layout the machine still boots, but its
	// kubelet cannot tell which manager it may run, so it runs none.
	localDir, err := machinedir.ProviderDir(dir, m)
	if err != nil {
		opts.Log.Info("The kubelet will run no manager Pod", "reason", err.Error())
	}
	a, err := newAgent(nodeOptions{
		Root:     filepath.Join(dir, machinedir.RootFS),
		LocalDir: localDir,
		Identity: Identity{Hostname: m.Hostname, ProviderID: m.ProviderID, Version: m.Version},
		Report:   rep,
		Log:      opts.Log.WithValues("machine", m.Machine, "cluster", m.Cluster),
	})
	if err != nil {
		return err
	}
	stop := func() { a.stop(opts.ShutdownTimeout) }

	if a.st.Started {
		if err := a.restart(ctx); err != nil {
			stop()
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}

	if err := a.bootstrap(ctx, dir); err != nil {
		stop()
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	a.setStatus(func(s *machinedir.Status) { s.Phase, s.Message = machinedir.PhaseRunning, "" })
	a.log.Info("Machine running", "node", a.st.NodeName, "role", a.st.Role)
	return a.wait(ctx, opts.ShutdownTimeout)
}

// bootstrap applies the bootstrap data; the Runner's Init and Join start
// the components.
func (a *agent) bootstrap(ctx context.Context, dir string) error {
	data, err := os.ReadFile(filepath.Join(dir, machinedir.BootstrapDataFile))
	if err != nil {
		return fmt.Errorf("reading the bootstrap data: %w (the local provider writes %s once the bootstrap provider produced it)", err, machinedir.BootstrapDataFile)
	}
	cfg, err := cloudinit.Parse(data)
	if err != nil {
		return fmt.Errorf("bootstrap data: %w", err)
	}
	steps, err := cloudinit.Plan(cfg, cloudinit.Options{Root: a.root, Hostname: a.id.Hostname})
	if err != nil {
		return fmt.Errorf("bootstrap data: %w", err)
	}
	runner := &Runner{Root: a.root, Init: a.kubeadmInit, Join: a.kubeadmJoin, Log: a.log}
	rep, applyErr := cloudinit.Apply(ctx, steps, runner)
	bs := &machinedir.BootstrapStatus{Complete: rep.Complete}
	for _, e := range rep.Entries {
		switch e.Outcome {
		case cloudinit.Skipped:
			action := stepName(e)
			msg := e.Source + ": " + action
			if e.Detail != "" && !strings.Contains(action, e.Detail) {
				msg += ": " + e.Detail
			}
			bs.Skipped = append(bs.Skipped, msg)
			a.log.Info("Bootstrap step skipped", "source", e.Source, "reason", e.Detail)
		case cloudinit.Failed:
			// The status (and from it the LocalMachine's conditions, which
			// everyone who may read LocalMachines sees) names the step only;
			// the error goes to the machine's own log.
			bs.Failed = e.Source + ": " + stepName(e) + " failed; the machine's log has the error"
			a.log.Error(e.Err, "Bootstrap step failed", "source", e.Source, "step", stepName(e))
		}
	}
	a.setStatus(func(s *machinedir.Status) { s.Bootstrap = bs })
	if bs.Failed != "" {
		return fmt.Errorf("bootstrap failed at %s", bs.Failed)
	}
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

// stepName names a bootstrap step without a command's arguments or a
// file's content: the name reaches the LocalMachine's status, and a
// command line may carry a token or a password. A command is named by its
// program alone (past any VAR=value prefix).
func stepName(e cloudinit.Entry) string {
	cmd, ok := e.Step.(cloudinit.RunCommand)
	if !ok {
		return e.Action
	}
	words := cmd.Argv
	if len(words) == 0 {
		words = strings.Fields(cmd.Shell)
	}
	for _, w := range words {
		if !strings.Contains(w, "=") {
			return "run " + filepath.Base(w) + " (arguments not shown)"
		}
	}
	return "run a command"
}

// dirReporter reports to the manager through the machine directory:
// status.json, and apiserver-endpoint while this machine's API server serves.
type dirReporter struct {
	dir    string
	mu     sync.Mutex
	status machinedir.Status
}

var _ Reporter = (*dirReporter)(nil)

// Status implements Reporter.
func (r *dirReporter) Status(change func(*machinedir.Status)) error { return r.setStatus(change) }

// setStatus changes the status and writes it; a failed write is only
// logged by the caller's logger, since the machine itself is fine.
func (r *dirReporter) setStatus(change func(*machinedir.Status)) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	before := r.status
	change(&r.status)
	r.status.PID = os.Getpid()
	if r.status.Phase != before.Phase || r.status.Since.IsZero() {
		r.status.Since = time.Now().UTC().Truncate(time.Second)
	}
	return machinedir.WriteStatus(r.dir, r.status)
}

// APIServer implements Reporter with the apiserver-endpoint file the load
// balancer reads.
func (r *dirReporter) APIServer(address string) error {
	if address == "" {
		return r.removeEndpoint()
	}
	if err := atomicfile.WriteFile(filepath.Join(r.dir, machinedir.APIServerEndpointFile), []byte(address), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", machinedir.APIServerEndpointFile, err)
	}
	return nil
}

func (r *dirReporter) removeEndpoint() error {
	if err := os.Remove(filepath.Join(r.dir, machinedir.APIServerEndpointFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// NewDirReporter reports to dir: status.json (machinedir.Status) and
// apiserver-endpoint while this machine's API server serves.
func NewDirReporter(dir string) Reporter { return &dirReporter{dir: dir} }
