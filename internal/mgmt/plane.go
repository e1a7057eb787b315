package mgmt

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"google.golang.org/grpc/grpclog"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"capstan.dev/capstan/internal/inventory"
)

// Options configure a management plane.
type Options struct {
	// StateDir holds everything the plane keeps between runs.
	StateDir StateDir
	// APIServerPort, when not zero, replaces the remembered API server port.
	APIServerPort int
	// Version is recorded in the run information for `capstan status`.
	Version string
	// EtcdLogLevel is etcd's log level (debug, info, warn, error).
	EtcdLogLevel string
	// Inventory, when set, lists the providers this plane runs; they are
	// recorded in clusterctl's provider inventory once the CRDs are
	// installed, so that upstream clusterctl recognises the plane.
	Inventory *inventory.Installed
}

// Plane is a running management plane.
type Plane struct {
	Dir   StateDir
	Ports Ports
	// Admin is a client configuration with full rights.
	Admin *rest.Config
	// Controllers is the identity in-process controllers use.
	Controllers *rest.Config
	// Since is when the plane became ready.
	Since time.Time

	lock            *Lock
	etcd            *embed.Etcd
	stopAPIServer   context.CancelFunc
	apiServerDone   <-chan error
	stopControllers context.CancelFunc
	controllersDone func()
}

// InUseError reports that another process holds the state directory.
type InUseError struct {
	Dir StateDir
	PID int
}

func (e *InUseError) Error() string {
	who := "another capstan process"
	if e.PID > 0 {
		who = "capstan process " + strconv.Itoa(e.PID)
	}
	return fmt.Sprintf("state directory %s is in use by %s; stop it with `capstan down --state-dir %s` or choose another --state-dir", e.Dir, who, e.Dir)
}

// PortInUseError reports that a port the plane needs is taken.
type PortInUseError struct {
	What string
	Port int
	Err  error
}

func (e *PortInUseError) Error() string {
	hint := "free it"
	if e.What == "API server" {
		hint = "free it, or start with --api-port to move the API server (kubeconfigs are rewritten)"
	} else {
		hint = "free it; etcd's ports are part of its stored membership and are kept across restarts"
	}
	return fmt.Sprintf("loopback port %d for the %s is taken (%v); %s", e.Port, e.What, e.Err, hint)
}

func (e *PortInUseError) Unwrap() error { return e.Err }

// Start brings a plane up over opts.StateDir and returns once it is ready:
// etcd and the API server answer, the CRDs are Established, the providers
// are recorded in clusterctl's inventory (with opts.Inventory), the
// controllers run and the kubeconfig is written.
func Start(ctx context.Context, opts Options) (_ *Plane, err error) {
	dir := opts.StateDir
	// gRPC's own logger reports every dial the API server's etcd clients
	// cancel while they settle; keep only its errors.
	grpclog.SetLoggerV2(grpclog.NewLoggerV2(io.Discard, io.Discard, os.Stderr))
	if err := dir.Prepare(); err != nil {
		return nil, err
	}
	lock, err := dir.TryLock()
	if errors.Is(err, ErrInUse) {
		_, pid := dir.Running()
		return nil, &InUseError{Dir: dir, PID: pid}
	}
	if err != nil {
		return nil, err
	}
	p := &Plane{Dir: dir, lock: lock}
	defer func() {
		if err != nil {
			p.Stop()
		}
	}()
	// A run file left by a killed instance describes nobody now.
	dir.clearRunInfo()

	if err := dir.pki().ensure(time.Now()); err != nil {
		return nil, fmt.Errorf("preparing certificates in %s: %w", dir.pki().dir, err)
	}
	logLevel := opts.EtcdLogLevel
	if logLevel == "" {
		logLevel = "error"
	}
	fresh := !dir.hasEtcdData()
	var listener net.Listener
	for attempt := 1; ; attempt++ {
		if p.Ports, listener, err = dir.bindPorts(opts.APIServerPort); err != nil {
			return nil, err
		}
		if p.etcd, err = startEtcd(ctx, dir, p.Ports, logLevel); err == nil {
			break
		}
		listener.Close()
		// etcd's ports are free when chosen but not held until etcd binds
		// them: another process may take one in between. A plane that has
		// never run can move to other ports; one that has keeps its own.
		if !fresh || attempt == 5 || !errors.Is(err, syscall.EADDRINUSE) {
			return nil, err
		}
		if err := dir.forgetPorts(); err != nil {
			return nil, err
		}
	}
	p.Admin = dir.restConfig(p.Ports, adminClient)
	p.Controllers = dir.restConfig(p.Ports, controllersClient)

	apiCtx, stopAPI := context.WithCancel(context.Background())
	p.stopAPIServer = stopAPI
	readyCheck := rest.CopyConfig(p.Admin)
	readyCheck.Timeout = 5 * time.Second
	if p.apiServerDone, err = runAPIServer(apiCtx, dir, p.Ports, listener, readyCheck); err != nil {
		return nil, err
	}

	if err := InstallCRDs(ctx, p.Admin); err != nil {
		return nil, err
	}
	if _, err := dir.encryptPlainSecrets(ctx, p.Ports, p.Admin); err != nil {
		return nil, err
	}
	if opts.Inventory != nil {
		if err := recordInventory(ctx, p.Admin, *opts.Inventory); err != nil {
			return nil, err
		}
	}

	ctrlCtx, stopControllers := context.WithCancel(klog.NewContext(context.Background(), klog.Background().WithName("controllers")))
	p.stopControllers = stopControllers
	if p.controllersDone, err = runControllers(ctrlCtx, p.Controllers, dir.pki()); err != nil {
		return nil, err
	}

	if err := dir.writeKubeconfig(p.Admin.Host); err != nil {
		return nil, fmt.Errorf("writing kubeconfig: %w", err)
	}
	p.Since = time.Now()
	err = dir.writeRunInfo(RunInfo{
		PID: os.Getpid(), Server: p.Admin.Host, Kubeconfig: dir.KubeconfigPath(),
		Since: p.Since, Version: opts.Version,
	})
	return p, err
}

// bindPorts settles the plane's ports and binds the API server's. Ports
// remembered from an earlier run are kept, and a taken one is an error; a
// plane that has never run (no etcd data yet) picks other ports instead, so
// that planes starting side by side (tests, CI) cannot collide.
func (d StateDir) bindPorts(apiServerPort int) (Ports, net.Listener, error) {
	fresh := !d.hasEtcdData()
	for attempt := 0; ; attempt++ {
		ports, err := d.loadOrChoosePorts(apiServerPort)
		if err != nil {
			return ports, nil, err
		}
		conflict := d.portConflict(ports)
		if conflict == nil {
			listener, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(ports.APIServer))
			if err == nil {
				return ports, listener, nil
			}
			conflict = &PortInUseError{What: "API server", Port: ports.APIServer, Err: err}
		}
		if !fresh || attempt == 10 || (conflict.What == "API server" && apiServerPort != 0) {
			return ports, nil, conflict
		}
		if err := d.forgetPorts(); err != nil {
			return ports, nil, err
		}
	}
}

func (d StateDir) portConflict(p Ports) *PortInUseError {
	for _, c := range []struct {
		what string
		port int
	}{{"etcd client", p.EtcdClient}, {"etcd peer", p.EtcdPeer}} {
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(c.port))
		if err != nil {
			return &PortInUseError{What: c.what, Port: c.port, Err: err}
		}
		l.Close()
	}
	return nil
}

// Done is closed when the API server stops on its own (a fatal error).
func (p *Plane) Done() <-chan error { return p.apiServerDone }

// Stop shuts the plane down in reverse order and releases the state
// directory. It is safe to call more than once.
func (p *Plane) Stop() {
	if p.stopControllers != nil {
		p.stopControllers()
		p.controllersDone()
		p.stopControllers = nil
	}
	if p.stopAPIServer != nil {
		p.stopAPIServer()
		if p.apiServerDone != nil {
			select {
			case <-p.apiServerDone:
			case <-time.After(30 * time.Second):
			}
		}
		p.stopAPIServer = nil
	}
	if p.etcd != nil {
		p.etcd.Close()
		p.etcd = nil
	}
	if p.lock != nil {
		p.Dir.clearRunInfo()
		p.lock.Release()
		p.lock = nil
	}
}
