package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"capstan.dev/capstan/internal/deploy"
	"capstan.dev/capstan/internal/install"
	"capstan.dev/capstan/internal/version"
)

func init() { register(newUpgradeCommand) }

func newUpgradeCommand(*globals) *cobra.Command {
	var (
		kubeconfig string
		timeout    time.Duration
	)
	cmd := &cobra.Command{
		Use:   "upgrade",
		Short: "Move a Capstan installation to this binary's version",
	}
	cmd.PersistentFlags().StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig of the cluster (default: $KUBECONFIG)")
	plan := &cobra.Command{
		Use:   "plan",
		Short: "Show what upgrade apply would change",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), 2*time.Minute)
			defer cancel()
			c, path, objs, _, err := upgradeTarget(ctx, kubeconfig)
			if err != nil {
				return err
			}
			p, err := install.MakePlan(ctx, c, objs, version.Version)
			if err != nil {
				return err
			}
			printPlan(cmd.OutOrStdout(), path, p)
			return nil
		},
	}
	apply := &cobra.Command{
		Use:   "apply",
		Short: "Apply this version's objects, migrate stored objects to the storage versions, wait for the new manager",
		Long: `Apply this binary's CRDs, RBAC and manager Deployment, then migrate every stored
object of a CRD whose status.storedVersions lists an old version to the storage
version, then wait until the new manager is available. Every step is idempotent:
an interrupted upgrade resumes where it stopped when run again.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout+5*time.Minute)
			defer cancel()
			out := cmd.OutOrStdout()
			c, path, objs, opts, err := upgradeTarget(ctx, kubeconfig)
			if err != nil {
				return err
			}
			in, err := install.Inspect(ctx, c)
			if err != nil {
				return err
			}
			from := in.Version
			if from == "" {
				from = "(unrecorded)"
			}
			fmt.Fprintf(out, "Upgrading Capstan in the cluster of %s: %s → %s\n", path, from, version.Version)
			if err := install.Apply(ctx, c, objs); err != nil {
				return err
			}
			fmt.Fprintf(out, "Applied %d objects.\n", len(objs))
			crds := install.CRDNames(objs)
			// The new CRDs must be served before their objects are re-written.
			if err := install.WaitCRDs(ctx, c, crds, out, timeout); err != nil {
				return err
			}
			// clusterctl reads the installed versions from its inventory.
			res, err := install.RecordProviders(ctx, c, opts, version.Version, timeout)
			if err != nil {
				return fmt.Errorf("%w; run `capstan upgrade apply` again to resume", err)
			}
			printInventory(out, res)
			if pending, err := install.Pending(ctx, c, crds); err != nil {
				return err
			} else if len(pending) > 0 {
				// Every API server rebuilds a CRD's storage from its watch
				// of the CRD, a moment after the change is accepted; objects
				// re-written before that would keep the old encoding.
				time.Sleep(5 * time.Second)
			}
			err = install.Migrate(ctx, c, crds, func(crd, storage string, n int) {
				fmt.Fprintf(out, "  migrated %d %s to %s\n", n, crd, storage)
			})
			if err != nil {
				return fmt.Errorf("%w; run `capstan upgrade apply` again to resume", err)
			}
			if err := install.Wait(ctx, c, crds, out, timeout); err != nil {
				return err
			}
			fmt.Fprintf(out, "Capstan is upgraded to %s.\n", version.Version)
			return nil
		},
	}
	apply.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "how long to wait for the CRDs and the new manager")
	cmd.AddCommand(plan, apply)
	return cmd
}

// upgradeTarget returns a client for the installation and this binary's
// objects, configured as the installed manager is (the local provider's
// directory is kept), with the options they were made from.
func upgradeTarget(ctx context.Context, kubeconfig string) (client.Client, string, []client.Object, deploy.Options, error) {
	var opts deploy.Options
	c, path, err := targetClient(kubeconfig)
	if err != nil {
		return nil, "", nil, opts, err
	}
	in, err := install.Inspect(ctx, c)
	if err != nil {
		return nil, path, nil, opts, fmt.Errorf("cluster of %s: %w", path, err)
	}
	if !in.Found {
		return nil, path, nil, opts, fmt.Errorf("Capstan is not installed in the cluster of %s: run `capstan init --kubeconfig %s`", path, path)
	}
	opts = deploy.Options{Image: deploy.Image(version.Version), Version: version.Version}
	d := &appsv1.Deployment{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: deploy.Namespace, Name: deploy.ManagerName}, d); err == nil {
		for _, ctr := range d.Spec.Template.Spec.Containers {
			for _, arg := range ctr.Args {
				if dir, ok := strings.CutPrefix(arg, "--local-dir="); ok {
					opts.LocalDir = dir
				}
			}
		}
	}
	objs, err := deploy.Objects(opts)
	return c, path, objs, opts, err
}

func printPlan(out io.Writer, path string, p install.Plan) {
	from := p.From
	if from == "" {
		from = "(unrecorded)"
	}
	if p.UpToDate() {
		fmt.Fprintf(out, "Capstan %s in the cluster of %s is up to date.\n", p.To, path)
		return
	}
	fmt.Fprintf(out, "Capstan in the cluster of %s: %s → %s\n", path, from, p.To)
	if p.FromImage != p.ToImage {
		fmt.Fprintf(out, "  manager image: %s → %s\n", p.FromImage, p.ToImage)
	}
	if len(p.ChangedCRDs) > 0 {
		fmt.Fprintf(out, "  CRDs to create or change: %s\n", strings.Join(p.ChangedCRDs, ", "))
	} else {
		fmt.Fprintln(out, "  CRDs: unchanged")
	}
	if len(p.Migrations) > 0 {
		fmt.Fprintf(out, "  stored objects to migrate to the storage version: %s\n", strings.Join(p.Migrations, ", "))
	}
	fmt.Fprintf(out, "Run `capstan upgrade apply --kubeconfig %s` to upgrade.\n", path)
}
