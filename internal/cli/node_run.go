package cli

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	"capstan.dev/capstan/internal/node/agent"
)

func newNodeRunCommand() *cobra.Command {
	var dir string
	var shutdown time.Duration
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Boot and run one local machine from its directory",
		Long: `Boot a local provider machine from DIR/machine.json and DIR/bootstrap-data
(cloud-init, including kubeadm init or join), then keep its components running
until SIGTERM or SIGINT. DIR/node.lock is held while it runs.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				return errors.New("--dir is required: the machine directory holding machine.json and bootstrap-data")
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			log := klog.NewKlogr()
			// Libraries underneath (controller-runtime helpers) log through
			// the same sink.
			ctrl.SetLogger(log)
			err := agent.Run(ctx, agent.Options{Dir: dir, Log: log, ShutdownTimeout: shutdown})
			klog.Flush()
			return err
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "the machine directory (machine.json, bootstrap-data, rootfs/)")
	cmd.Flags().DurationVar(&shutdown, "shutdown-timeout", 30*time.Second, "how long a graceful stop may take before components are abandoned")
	return cmd
}
