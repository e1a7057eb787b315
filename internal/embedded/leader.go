package embedded

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	componentbaseconfig "k8s.io/component-base/config"
)

// component runs one leader-elected (or unelected) component in terms: a
// term builds the component afresh and runs it until its context ends, so a
// process that loses its lease and wins it back later starts clean instead of
// exiting as the upstream binaries do (here the process also hosts etcd and
// the API server, which must not go down with it).
type component struct {
	name string
	log  logr.Logger

	mu     sync.Mutex
	failed error

	done     chan error
	stopped  chan struct{}
	elector  *leaderelection.HealthzAdaptor
	stopOnce sync.Once
}

// term runs the component while ctx lasts; returning before ctx ends is a
// failure.
type term func(ctx context.Context) error

func newComponent(name string, log logr.Logger) *component {
	return &component{name: name, log: log, done: make(chan error, 1), stopped: make(chan struct{})}
}

// run starts the component in the background. With election nil it runs one
// term directly; otherwise it campaigns for the lease and runs a term while
// it holds it, again and again until ctx ends.
func (c *component) run(ctx context.Context, client kubernetes.Interface, election *componentbaseconfig.LeaderElectionConfiguration, t term) error {
	if election == nil || !election.LeaderElect {
		go func() {
			defer close(c.stopped)
			if err := t(ctx); err != nil && ctx.Err() == nil {
				c.fail(err)
			}
		}()
		return nil
	}
	host, err := os.Hostname()
	if err != nil {
		return fmt.Errorf("%s leader election identity: %w", c.name, err)
	}
	// Several control-plane machines of one cluster run on this host; the
	// suffix keeps their identities apart.
	identity := host + "_" + string(uuid.NewUUID())
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock,
		election.ResourceNamespace, election.ResourceName,
		client.CoreV1(), client.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: identity})
	if err != nil {
		return fmt.Errorf("%s leader election lock: %w", c.name, err)
	}
	c.elector = leaderelection.NewLeaderHealthzAdaptor(20 * time.Second)
	go func() {
		defer close(c.stopped)
		for ctx.Err() == nil {
			if err := c.campaign(ctx, lock, election, t); err != nil {
				c.fail(err)
				return
			}
		}
	}()
	return nil
}

// campaign waits to lead, runs one term while leading and returns once the
// lease is lost or ctx ends.
func (c *component) campaign(ctx context.Context, lock resourcelock.Interface, election *componentbaseconfig.LeaderElectionConfiguration, t term) error {
	leading := make(chan context.Context, 1)
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   election.LeaseDuration.Duration,
		RenewDeadline:   election.RenewDeadline.Duration,
		RetryPeriod:     election.RetryPeriod.Duration,
		ReleaseOnCancel: true,
		Name:            c.name,
		WatchDog:        c.elector,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(termCtx context.Context) { leading <- termCtx },
			OnStoppedLeading: func() {},
		},
	})
	if err != nil {
		return fmt.Errorf("%s leader election: %w", c.name, err)
	}
	c.elector.SetLeaderElection(elector)
	// The election gets a context of its own so that a term that fails
	// while leading also gives the lease up.
	electCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	electionDone := make(chan struct{})
	go func() {
		defer close(electionDone)
		elector.Run(electCtx)
	}()
	select {
	case termCtx := <-leading:
		c.log.Info("Leading; starting", "component", c.name, "lease", election.ResourceName)
		err := t(termCtx)
		cancel()
		<-electionDone
		if err != nil && termCtx.Err() == nil {
			return err
		}
		if ctx.Err() == nil {
			c.log.Info("Lost the lease; waiting to lead again", "component", c.name)
		}
	case <-electionDone:
	}
	return nil
}

func (c *component) fail(err error) {
	err = fmt.Errorf("%s: %w", c.name, err)
	c.log.Error(err, "Component failed", "component", c.name)
	c.mu.Lock()
	c.failed = err
	c.mu.Unlock()
	c.done <- err
}

// Healthy is nil while the component runs (leading or standing by) and can
// renew its lease when it holds one.
func (c *component) Healthy() error {
	c.mu.Lock()
	failed := c.failed
	c.mu.Unlock()
	if failed != nil {
		return failed
	}
	select {
	case <-c.stopped:
		return fmt.Errorf("%s is stopped", c.name)
	default:
	}
	if c.elector != nil {
		if err := c.elector.Check(nil); err != nil {
			return fmt.Errorf("%s leader election: %w", c.name, err)
		}
	}
	return nil
}

// Done yields an error when the component failed on its own.
func (c *component) Done() <-chan error { return c.done }

// Wait returns once the component stopped after its context ended.
func (c *component) Wait() { <-c.stopped }
