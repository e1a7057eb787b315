package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"capstan.dev/capstan/internal/deploy"
	"capstan.dev/capstan/internal/install"
)

func init() { register(newDeleteCommand) }

func newDeleteCommand(*globals) *cobra.Command {
	var (
		kubeconfig  string
		o           install.DeleteOptions
		timeout     time.Duration
		includeCRDs bool
		force       bool
	)
	cmd := &cobra.Command{
		Use:   "delete",
		Short: "Remove Capstan (manager, RBAC, namespace) from a cluster, keeping its CRDs and objects unless --include-crd",
		Long: `Remove the Capstan installation from the cluster named by --kubeconfig (or
$KUBECONFIG): the manager Deployment, its RBAC and the capstan-system namespace.
The CRDs, and so every Cluster API object, stay unless --include-crd; that is
refused while Cluster objects exist, unless --force.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, path, err := targetClient(kubeconfig)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout+time.Minute)
			defer cancel()
			out := cmd.OutOrStdout()
			in, err := install.Inspect(ctx, c)
			if err != nil {
				return fmt.Errorf("cluster of %s: %w", path, err)
			}
			if !in.Found && !includeCRDs {
				fmt.Fprintf(out, "Capstan is not installed in the cluster of %s; nothing to delete.\n", path)
				return nil
			}
			objs, err := deploy.Objects(deploy.Options{})
			if err != nil {
				return err
			}
			o.IncludeCRDs, o.Force, o.Timeout, o.Out = includeCRDs, force, timeout, out
			fmt.Fprintf(out, "Deleting Capstan from the cluster of %s\n", path)
			if err := install.Delete(ctx, c, objs, o); err != nil {
				return err
			}
			if includeCRDs {
				fmt.Fprintln(out, "Capstan and its CRDs are deleted.")
			} else {
				fmt.Fprintln(out, "Capstan is deleted; its CRDs and every Cluster API object are kept.")
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig of the cluster (default: $KUBECONFIG)")
	f.BoolVar(&includeCRDs, "include-crd", false, "also delete Capstan's CRDs and with them every Cluster API object")
	f.BoolVar(&force, "force", false, "with --include-crd: delete even while Cluster objects exist")
	f.DurationVar(&timeout, "timeout", 5*time.Minute, "how long to wait for the namespace to go")
	return cmd
}
