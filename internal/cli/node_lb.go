package cli

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"capstan.dev/capstan/internal/providers/local/lb"
)

func newNodeLBCommand() *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "lb",
		Short: "Run a local cluster's control-plane load balancer from its directory",
		Long: `Run the control-plane load balancer of a local cluster: listen on
127.0.0.1:<port> from DIR/lb.json and forward connections round-robin to the
healthy API servers of the cluster's machines. Holds DIR/lb.lock while it runs;
SIGTERM stops it. The local infrastructure provider starts it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				return errors.New("--dir is required: the load balancer's directory, holding lb.json")
			}
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
			defer stop()
			return lb.Run(ctx, dir, zap.New().WithName("lb"))
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "the load balancer's directory (<root>/<namespace>/<cluster>/lb)")
	return cmd
}
