package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"capstan.dev/capstan/internal/deploy"
	"capstan.dev/capstan/internal/install"
	"capstan.dev/capstan/internal/inventory"
	"capstan.dev/capstan/internal/mgmt"
	"capstan.dev/capstan/internal/providers/local"
	"capstan.dev/capstan/internal/scheme"
	"capstan.dev/capstan/internal/version"
)

func init() { register(newInitCommand) }

type initOptions struct {
	kubeconfig     string
	infrastructure string
	localDir       string
	wait           bool
	timeout        time.Duration
}

func newInitCommand(g *globals) *cobra.Command {
	o := &initOptions{}
	cmd := &cobra.Command{
		Use:   "init",
		Short: "Install Capstan (CRDs, RBAC, manager) into a cluster and wait until it runs",
		Long: `Install Capstan into the cluster named by --kubeconfig (or $KUBECONFIG): its CRDs,
the capstan-system namespace, least-privilege RBAC and the manager Deployment
running ghcr.io/capstan-dev/capstan at this binary's version. Objects are applied
with server-side apply (field manager "capstan"), so running init again is
harmless. With --infrastructure local the manager also runs the local provider
on --local-dir, which suits a cluster whose nodes are local machines of this
host: there the manager Pod runs as a process of this host. Without
--local-dir it is the local directory of --state-dir's plane; init refuses
when the cluster's nodes are local machines of another plane.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runInit(cmd, g, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of the cluster to install into (default: $KUBECONFIG)")
	f.StringVar(&o.infrastructure, "infrastructure", "", `infrastructure provider the manager runs besides the core ones: "local" or none`)
	f.StringVar(&o.localDir, "local-dir", "", "with --infrastructure local: the host directory of local machines (default: <state-dir>/local, the embedded plane's)")
	f.BoolVar(&o.wait, "wait", true, "wait until the CRDs are established and the manager is available")
	f.DurationVar(&o.timeout, "timeout", 5*time.Minute, "how long to wait")
	return cmd
}

func runInit(cmd *cobra.Command, g *globals, o *initOptions) error {
	opts := deploy.Options{Image: deploy.Image(version.Version), Version: version.Version}
	switch o.infrastructure {
	case "":
		if o.localDir != "" {
			return errors.New("--local-dir needs --infrastructure local")
		}
	case "local":
		if o.localDir != "" {
			abs, err := filepath.Abs(o.localDir)
			if err != nil {
				return fmt.Errorf("--local-dir %s: %w", o.localDir, err)
			}
			opts.LocalDir = abs
		} else if _, err := g.dir(); err != nil {
			return fmt.Errorf("--local-dir is not given and %w", err)
		}
	default:
		return fmt.Errorf("--infrastructure %q: Capstan has the local provider built in (\"local\"); install other providers with their own manifests", o.infrastructure)
	}
	c, path, err := targetClient(o.kubeconfig)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), o.timeout+time.Minute)
	defer cancel()
	if o.infrastructure == "local" && opts.LocalDir == "" {
		state, err := g.dir()
		if err != nil {
			return fmt.Errorf("--local-dir is not given and %w", err)
		}
		nodes := &corev1.NodeList{}
		if err := c.List(ctx, nodes); err != nil {
			return fmt.Errorf("listing the Nodes of the cluster of %s, to tell whose local machines they are: %w", path, err)
		}
		if opts.LocalDir, err = localMachinesDir(nodes.Items, state); err != nil {
			return err
		}
	}
	out := cmd.OutOrStdout()
	in, err := install.Inspect(ctx, c)
	if err != nil {
		return fmt.Errorf("cluster of %s: %w", path, err)
	}
	if in.Found && in.Version != version.Version {
		installed := in.Version
		if installed == "" {
			installed = "an unrecorded version (image " + in.Image + ")"
		}
		return fmt.Errorf("Capstan %s is already installed in the cluster of %s; this binary is %s: run `capstan upgrade plan --kubeconfig %s` and `capstan upgrade apply`, or `capstan delete` first",
			installed, path, version.Version, path)
	}
	objs, err := deploy.Objects(opts)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "Installing Capstan %s into the cluster of %s (manager image %s", version.Version, path, opts.Image)
	if opts.LocalDir != "" {
		fmt.Fprintf(out, ", local provider on %s", opts.LocalDir)
	}
	fmt.Fprintln(out, ")")
	if err := install.Apply(ctx, c, objs); err != nil {
		return err
	}
	fmt.Fprintf(out, "Applied %d objects.\n", len(objs))
	res, err := install.RecordProviders(ctx, c, opts, version.Version, o.timeout)
	if err != nil {
		return fmt.Errorf("%w; the objects are applied: run `capstan init` again to finish", err)
	}
	printInventory(out, res)
	if !o.wait {
		return nil
	}
	if err := install.Wait(ctx, c, install.CRDNames(objs), out, o.timeout); err != nil {
		return err
	}
	fmt.Fprintf(out, "Capstan %s is installed and its manager is running.\n", version.Version)
	return nil
}

// printInventory says what was written into clusterctl's inventory, if
// anything.
func printInventory(out io.Writer, res inventory.Result) {
	if !res.Changed() {
		return
	}
	fmt.Fprintf(out, "Recorded the providers in clusterctl's inventory (namespace %s):", deploy.Namespace)
	for _, part := range []struct {
		verb  string
		names []string
	}{{"created", res.Created}, {"updated", res.Updated}, {"removed", res.Deleted}} {
		if len(part.names) > 0 {
			fmt.Fprintf(out, " %s %s;", part.verb, strings.Join(part.names, ", "))
		}
	}
	fmt.Fprintln(out)
}

// targetClient is a client for the cluster of --kubeconfig, else of
// $KUBECONFIG; it returns the kubeconfig's path for messages.
func targetClient(kubeconfig string) (client.Client, string, error) {
	path, source := kubeconfig, "--kubeconfig"
	if path == "" {
		path, source = os.Getenv("KUBECONFIG"), "$KUBECONFIG"
	}
	if path == "" {
		return nil, "", errors.New("no cluster named: pass --kubeconfig FILE or set KUBECONFIG")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, path, fmt.Errorf("%s %s: %w", source, path, err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return nil, path, fmt.Errorf("%s %s: %w", source, path, err)
	}
	return c, path, nil
}

// localMachinesDir is the local provider's directory that --infrastructure
// local without --local-dir installs: the local directory of the plane in
// dir (--state-dir's, or the default one). When the cluster's Nodes are
// local machines and none of them is that plane's, the provider would not
// see its own cluster's machines (and a later move would hand the cluster to
// it): that is refused, saying what to pass.
func localMachinesDir(nodes []corev1.Node, dir mgmt.StateDir) (string, error) {
	localDir, err := filepath.Abs(dir.LocalDir())
	if err != nil {
		return "", fmt.Errorf("--state-dir %s: %w", dir, err)
	}
	var others []string
	for _, n := range nodes {
		rest, ok := strings.CutPrefix(n.Spec.ProviderID, local.ProviderIDPrefix)
		if !ok {
			continue
		}
		ns, name, ok := strings.Cut(rest, "/")
		if !ok {
			continue
		}
		// <local dir>/<namespace>/<cluster>/machines/<name>: Kubernetes
		// names hold no glob characters.
		if found, _ := filepath.Glob(filepath.Join(localDir, ns, "*", "machines", name)); len(found) > 0 {
			return localDir, nil
		}
		others = append(others, n.Name)
	}
	if len(others) > 0 {
		return "", fmt.Errorf("the cluster's Nodes (%s) are local machines, but not of the plane in %s (%s holds none of them): "+
			"pass --state-dir with the plane that made them, or --local-dir with their local directory", strings.Join(others, ", "), dir, localDir)
	}
	return localDir, nil
}
