package guest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-logr/logr"

	"capstan.dev/capstan/internal/kubeadm"
	"capstan.dev/capstan/internal/lockfile"
	"capstan.dev/capstan/internal/node/agent"
	"capstan.dev/capstan/internal/providers/local/machinedir"
)

// Paths inside the guest.
const (
	// StateDir holds what the node became (package agent's files), the
	// service's status.json and the lock kubeadm and the service share.
	StateDir = "/var/lib/capstan"
	lockFile = StateDir + "/node.lock"
)

// kubeadm's default ports, which a guest uses: its host forwards a port to
// the API server's.
const (
	defaultAPIServerPort  = 6443
	defaultEtcdClientPort = 2379
	defaultEtcdPeerPort   = 2380
)

// Service starts the service that runs the node's components from its
// saved state; in a guest it is systemd's capstan-node.service.
type Service interface {
	Start(ctx context.Context) error
}

// Options are one `capstan kubeadm init|join`.
type Options struct {
	// Root is the guest's "/" ("/" in a guest; a directory in tests).
	Root string
	// Config is the --config file, as the guest names it.
	Config string
	// Hostname names the node when nodeRegistration.name is empty
	// (default: the guest's hostname).
	Hostname string
	// Ports override kubeadm's defaults (bindPort, 2379, 2380); tests on a
	// shared host use free ones.
	Ports *agent.Ports
	// Service is started once the node is set up.
	Service Service
	// Ready bounds the wait for the service to report the components
	// running (default 5 minutes).
	Ready time.Duration
	Log   logr.Logger
}

// Init is `kubeadm init --config FILE` on the guest's root.
func Init(ctx context.Context, o Options) error {
	return setUp(ctx, o, "init", func(ctx context.Context, n *agent.Node, path string) error { return n.Init(ctx, path) })
}

// Join is `kubeadm join --config FILE` on the guest's root.
func Join(ctx context.Context, o Options) error {
	return setUp(ctx, o, "join", func(ctx context.Context, n *agent.Node, path string) error { return n.Join(ctx, path) })
}

func setUp(ctx context.Context, o Options, verb string, run func(context.Context, *agent.Node, string) error) error {
	if o.Service == nil {
		return errors.New("no service to hand the node over to")
	}
	if o.Ready == 0 {
		o.Ready = 5 * time.Minute
	}
	path, err := inRoot(o.Root, o.Config)
	if err != nil {
		return fmt.Errorf("--config: %w", err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading the kubeadm configuration: %w", err)
	}
	docs, err := kubeadm.Parse(data)
	if err != nil {
		return fmt.Errorf("%s: %w", o.Config, err)
	}
	ports := o.Ports
	if ports == nil {
		ports = defaultPorts(docs)
	}
	if o.Hostname == "" {
		if o.Hostname, err = os.Hostname(); err != nil {
			return fmt.Errorf("reading the hostname: %w", err)
		}
	}
	lk, err := lock(o.Root)
	if err != nil {
		return err
	}
	n, err := newNode(o.Root, o.Hostname, ports, o.Log, nil)
	if err != nil {
		lk.Release()
		return err
	}
	if n.Initialised() {
		lk.Release()
		return fmt.Errorf("this machine is already set up (as %s %q, %s): kubeadm %s runs once per machine; delete the Machine to get a new one", n.Role(), n.NodeName(), filepath.Join(StateDir, "node.json"), verb)
	}
	o.Log.Info("Setting the node up", "kubeadm", verb, "config", o.Config)
	err = run(ctx, n, path)
	// The service runs the components from now on; these in-process ones
	// stop either way (on failure, so that the command exits cleanly).
	n.Stop(30 * time.Second)
	lk.Release()
	if err != nil {
		return fmt.Errorf("kubeadm %s: %w", verb, err)
	}
	return handOver(ctx, o, n.NodeName())
}

// handOver starts the service and waits for it to report the node running.
func handOver(ctx context.Context, o Options, node string) error {
	status := filepath.Join(o.Root, StateDir)
	// A status from the in-process run would look like the service's.
	if err := os.Remove(filepath.Join(status, machinedir.StatusFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := InstallUnit(o.Root); err != nil {
		return err
	}
	o.Log.Info("Starting the node's service", "unit", UnitName, "node", node)
	if err := o.Service.Start(ctx); err != nil {
		return fmt.Errorf("starting %s: %w", UnitName, err)
	}
	ctx, cancel := context.WithTimeout(ctx, o.Ready)
	defer cancel()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	var last string
	for {
		s, err := machinedir.ReadStatus(status)
		switch {
		case err != nil:
			last = err.Error()
		case s == nil:
			last = "the service has not reported yet"
		case s.Phase == machinedir.PhaseRunning:
			o.Log.Info("Node running under its service", "node", node, "unit", UnitName)
			return nil
		case s.Phase == machinedir.PhaseFailed:
			return fmt.Errorf("%s failed to start the node's components: %s (journalctl -u %s)", UnitName, s.Message, UnitName)
		default:
			last = "phase " + s.Phase
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s did not report the node running within %s (%s; journalctl -u %s)", UnitName, o.Ready, last, UnitName)
		case <-tick.C:
		}
	}
}

// Serve is `capstan node serve --root ROOT`, the service: it starts the
// components of the node kubeadm set up and runs them until ctx ends (nil)
// or one fails (its error). Its status goes to StateDir/status.json.
func Serve(ctx context.Context, root string, log logr.Logger) (err error) {
	lk, err := lock(root)
	if err != nil {
		return err
	}
	defer lk.Release()
	rep := agent.NewDirReporter(filepath.Join(root, StateDir))
	report := func(phase, msg string) {
		if err := rep.Status(func(s *machinedir.Status) { s.Phase, s.Message = phase, msg }); err != nil {
			log.Error(err, "Writing the node's status")
		}
	}
	report(machinedir.PhaseBooting, "")
	defer func() {
		if err != nil {
			report(machinedir.PhaseFailed, err.Error())
		}
	}()
	hostname, _ := os.Hostname()
	// The ports were saved by kubeadm init or join; Serve never chooses any.
	n, err := newNode(root, hostname, nil, log, rep)
	if err != nil {
		return err
	}
	if !n.Initialised() {
		return fmt.Errorf("nothing to run: kubeadm init or join has not set this machine up (no %s)", filepath.Join(StateDir, "node.json"))
	}
	err = n.Resume(ctx)
	if err == nil {
		// Running means what kubeadm join waits for: the Node registered.
		err = n.WaitRegistered(ctx)
	}
	if err != nil {
		n.Stop(30 * time.Second)
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	report(machinedir.PhaseRunning, "")
	log.Info("Node running", "node", n.NodeName(), "role", n.Role())
	return n.Wait(ctx, 30*time.Second)
}

func newNode(root, hostname string, ports *agent.Ports, log logr.Logger, rep agent.Reporter) (*agent.Node, error) {
	return agent.NewNode(agent.NodeOptions{
		Root:     root,
		Identity: agent.Identity{Hostname: hostname},
		// The host forwards a port to the API server, which must therefore
		// listen on the guest's interface too.
		Network: agent.Network{Ports: ports, APIServerBindAddress: "0.0.0.0"},
		Report:  rep,
		Log:     log,
	})
}

// lock takes the node's lock, shared by kubeadm and the service so that
// they never run the components at the same time.
func lock(root string) (*lockfile.Lock, error) {
	p := filepath.Join(root, lockFile)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return nil, err
	}
	lk, err := lockfile.Acquire(p, 0o644)
	if errors.Is(err, lockfile.ErrHeld) {
		return nil, fmt.Errorf("%s is held: %s or another capstan kubeadm runs this node", lockFile, UnitName)
	}
	return lk, err
}

// defaultPorts are kubeadm's: the API server on the configuration's
// bindPort (6443 when unset), etcd on 2379 and 2380.
func defaultPorts(docs kubeadm.Documents) *agent.Ports {
	p := &agent.Ports{APIServer: defaultAPIServerPort, EtcdClient: defaultEtcdClientPort, EtcdPeer: defaultEtcdPeerPort}
	switch {
	case docs.Init != nil && docs.Init.LocalAPIEndpoint.BindPort != 0:
		p.APIServer = int(docs.Init.LocalAPIEndpoint.BindPort)
	case docs.Join != nil && docs.Join.ControlPlane != nil && docs.Join.ControlPlane.LocalAPIEndpoint.BindPort != 0:
		p.APIServer = int(docs.Join.ControlPlane.LocalAPIEndpoint.BindPort)
	}
	return p
}

// inRoot resolves an absolute guest path under root.
func inRoot(root, p string) (string, error) {
	if !filepath.IsAbs(p) {
		abs, err := filepath.Abs(p)
		if err != nil {
			return "", err
		}
		if root != "/" {
			return "", fmt.Errorf("path %q is relative; with --root give an absolute path inside the root", p)
		}
		p = abs
	}
	if strings.Contains(p, "..") {
		return "", fmt.Errorf("path %q contains ..", p)
	}
	return filepath.Join(root, filepath.Clean(p)), nil
}
