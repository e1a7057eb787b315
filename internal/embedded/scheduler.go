package embedded

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	schedulerapp "k8s.io/kubernetes/cmd/kube-scheduler/app"
	scheduleroptions "k8s.io/kubernetes/cmd/kube-scheduler/app/options"
)

// SchedulerConfig configures kube-scheduler.
type SchedulerConfig struct {
	// Args are kube-scheduler flags; --kubeconfig is required. The scheduler
	// serves no port of its own unless --secure-port says so.
	Args []string
	Log  logr.Logger
}

// Scheduler is a running kube-scheduler.
type Scheduler struct {
	*component
}

// StartScheduler validates the flags, then schedules in the background (while
// holding the kube-scheduler lease when --leader-elect is on, the default)
// until ctx ends.
func StartScheduler(ctx context.Context, cfg SchedulerConfig) (*Scheduler, error) {
	opts := scheduleroptions.NewOptions()
	fs := newFlagSet("kube-scheduler")
	for _, set := range opts.Flags.FlagSets {
		fs.AddFlagSet(set)
	}
	if err := parseFlags("kube-scheduler", fs, append([]string{"--secure-port=0"}, cfg.Args...)); err != nil {
		return nil, err
	}
	logCtx := klog.NewContext(ctx, cfg.Log)
	// A first set-up validates the flags now, where the caller can report
	// them; each term builds its own scheduler, since one that stopped
	// cannot run again.
	checkCtx, cancel := context.WithCancel(logCtx)
	cc, _, err := schedulerapp.Setup(checkCtx, opts)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("kube-scheduler options: %w", err)
	}
	election := cc.ComponentConfig.LeaderElection

	s := &Scheduler{component: newComponent("kube-scheduler", cfg.Log)}
	run := func(ctx context.Context) error {
		ctx = klog.NewContext(ctx, cfg.Log)
		cc, sched, err := schedulerapp.Setup(ctx, opts)
		if err != nil {
			return err
		}
		cc.EventBroadcaster.StartRecordingToSink(ctx.Done())
		defer cc.EventBroadcaster.Shutdown()
		cc.InformerFactory.Start(ctx.Done())
		cc.DynInformerFactory.Start(ctx.Done())
		cc.InformerFactory.WaitForCacheSync(ctx.Done())
		cc.DynInformerFactory.WaitForCacheSync(ctx.Done())
		if err := sched.WaitForHandlersSync(ctx); err != nil && ctx.Err() == nil {
			return fmt.Errorf("event handlers did not sync: %w", err)
		}
		sched.Run(ctx)
		cc.InformerFactory.Shutdown()
		cc.DynInformerFactory.Shutdown()
		if ctx.Err() == nil {
			return errors.New("scheduler stopped")
		}
		return nil
	}
	if err := s.run(ctx, cc.Client, &election, run); err != nil {
		return nil, err
	}
	return s, nil
}
