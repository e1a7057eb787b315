package cli

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	"capstan.dev/capstan/internal/node/guest"
)

// newNodeServeCommand is capstan-node.service in a QEMU guest: it runs the
// components kubeadm init or join set the machine up with.
func newNodeServeCommand() *cobra.Command {
	var root string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the components of a guest machine that capstan kubeadm set up (" + guest.UnitName + ")",
		Long: `Start the components that capstan kubeadm init or join set this machine up
with (saved under ROOT` + guest.StateDir + `) and keep them running until SIGTERM or
SIGINT. Its status is ROOT` + guest.StateDir + `/status.json.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			log := klog.NewKlogr()
			ctrl.SetLogger(log)
			err := guest.Serve(ctx, root, log)
			klog.Flush()
			return err
		},
	}
	cmd.Flags().StringVar(&root, "root", "/", "the machine's root directory")
	return cmd
}
