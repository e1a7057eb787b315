package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"capstan.dev/capstan/internal/describe"
	"capstan.dev/capstan/internal/scheme"
)

func init() { register(newDescribeCommand) }

// mgmtTarget is the management cluster a command reads and writes: the one
// --kubeconfig or --state-dir names on the command line (not both), else
// $KUBECONFIG's, else the default state directory's plane when it runs,
// else ~/.kube/config's. A cluster the user named is never passed over for
// another: a flag before the environment, as in kubectl and clusterctl.
type mgmtTarget struct {
	kubeconfig string
	namespace  string
	// keepsFiles marks a command that also stores files in --state-dir
	// (provider install): there --state-dir beside --kubeconfig says where
	// the files go, not which cluster.
	keepsFiles bool
}

func (m *mgmtTarget) addFlags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&m.kubeconfig, "kubeconfig", "", "kubeconfig of the management cluster (default: $KUBECONFIG, else the running capstan plane's)")
	cmd.Flags().StringVarP(&m.namespace, "namespace", "n", "default", "namespace of the cluster's objects")
}

// loadingRules says where the management cluster's kubeconfig is, by the
// rule above.
func (m *mgmtTarget) loadingRules(g *globals) *clientcmd.ClientConfigLoadingRules {
	if m.kubeconfig != "" {
		return &clientcmd.ClientConfigLoadingRules{ExplicitPath: m.kubeconfig}
	}
	if g.stateDirNamed() {
		if dir, err := g.dir(); err == nil {
			return &clientcmd.ClientConfigLoadingRules{ExplicitPath: dir.KubeconfigPath()}
		}
	}
	if os.Getenv(clientcmd.RecommendedConfigPathEnvVar) != "" {
		return clientcmd.NewDefaultClientConfigLoadingRules()
	}
	if dir, err := g.dir(); err == nil {
		if running, _ := dir.Running(); running {
			return &clientcmd.ClientConfigLoadingRules{ExplicitPath: dir.KubeconfigPath()}
		}
	}
	return clientcmd.NewDefaultClientConfigLoadingRules()
}

// clientConfig is the management cluster's kubeconfig, found by
// loadingRules: its REST config, and its context's namespace.
func clientConfig(rules *clientcmd.ClientConfigLoadingRules) clientcmd.ClientConfig {
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{})
}

// named refuses two flags that name different management clusters, and a
// --state-dir whose plane does not run (its kubeconfig left behind names
// nothing that answers).
func (m *mgmtTarget) named(g *globals) error {
	if !g.stateDirNamed() {
		return nil
	}
	if m.kubeconfig != "" {
		if m.keepsFiles {
			return nil
		}
		return fmt.Errorf("--kubeconfig %s and --state-dir %s both name a management cluster: pass only one of them", m.kubeconfig, g.stateDir)
	}
	dir, err := g.dir()
	if err != nil {
		return err
	}
	if running, _ := dir.Running(); !running {
		return fmt.Errorf("--state-dir %s: capstan is not running there; start it with `capstan up --state-dir %s`, or name another management cluster with --kubeconfig", g.stateDir, g.stateDir)
	}
	return nil
}

func (m *mgmtTarget) restConfig(g *globals) (*rest.Config, error) {
	if err := m.named(g); err != nil {
		return nil, err
	}
	rules := m.loadingRules(g)
	cfg, err := clientConfig(rules).ClientConfig()
	switch {
	case err == nil:
		return cfg, nil
	case rules.ExplicitPath == "" && clientcmd.IsEmptyConfig(err):
		return nil, fmt.Errorf("no management cluster: capstan is not running in %s (start it with capstan up), and neither --kubeconfig nor $KUBECONFIG names another", g.stateDir)
	}
	return nil, m.kubeconfigError(rules, err)
}

// kubeconfigError says which kubeconfig err is about: the flag's, the
// plane's or the one $KUBECONFIG names.
func (m *mgmtTarget) kubeconfigError(rules *clientcmd.ClientConfigLoadingRules, err error) error {
	switch {
	case m.kubeconfig != "":
		return fmt.Errorf("--kubeconfig %s: %w", m.kubeconfig, err)
	case rules.ExplicitPath != "":
		return fmt.Errorf("reading the capstan plane's kubeconfig %s: %w", rules.ExplicitPath, err)
	}
	return fmt.Errorf("reading the kubeconfig ($KUBECONFIG): %w", err)
}

func (m *mgmtTarget) client(g *globals) (client.Client, error) {
	cfg, err := m.restConfig(g)
	if err != nil {
		return nil, err
	}
	cfg.Timeout = 30 * time.Second
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		// A CA or client certificate that does not parse fails here.
		return nil, m.kubeconfigError(m.loadingRules(g), err)
	}
	return c, nil
}

// describeClock is the time SINCE is measured to; tests fix it.
var describeClock = time.Now

type describeOptions struct {
	target          mgmtTarget
	showConditions  string
	showMachineSets bool
	grouping        bool
	echo            bool
	color           bool
	output          string
}

func newDescribeCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "describe", Short: "Describe Cluster API objects"}
	o := &describeOptions{}
	cluster := &cobra.Command{
		Use:   "cluster NAME",
		Short: "Show a cluster's objects as a tree, with what is ready and what is not",
		Long: `Show a cluster's objects as a tree: the Cluster, its infrastructure, its control
plane and its Machines, and the workers (each MachineDeployment and its Machines).
Each row has replica counts and the condition that sums the object up (Available
or Ready) with its reason, how long it has held and its message.

Machines in the same state share one row unless --grouping=false; a Machine's
infrastructure machine and bootstrap config show only when their state differs
from the Machine's unless --echo.`,
		Example: `  capstan describe cluster demo
  capstan describe cluster demo --show-conditions KubeadmControlPlane,Machine/demo-md-0-abcde
  capstan describe cluster demo --show-machinesets --grouping=false -o yaml`,
		Args: exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("color") {
				o.color = isTerminal(cmd.OutOrStdout()) && os.Getenv("NO_COLOR") == ""
			}
			c, err := o.target.client(g)
			if err != nil {
				return err
			}
			return runDescribeCluster(cmd.Context(), c, cmd.OutOrStdout(), cmd.ErrOrStderr(), args[0], o, describeClock())
		},
	}
	f := cluster.Flags()
	o.target.addFlags(cluster)
	f.StringVar(&o.showConditions, "show-conditions", "", `list every condition of these objects: "all", kinds (Machine, kcp, md) or kind/name (md/demo-md-0), comma-separated`)
	f.BoolVar(&o.showMachineSets, "show-machinesets", false, "show each MachineDeployment's MachineSets")
	f.BoolVar(&o.grouping, "grouping", true, "collapse Machines in the same state into one row")
	f.BoolVar(&o.echo, "echo", false, "show infrastructure machines and bootstrap configs also when their state is their Machine's")
	f.BoolVar(&o.color, "color", false, "colour the STATUS column (default: when the output is a terminal)")
	f.StringVarP(&o.output, "output", "o", "", "output format: empty for the table, json or yaml for the tree as data")
	cmd.AddCommand(cluster)
	return cmd
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// runDescribeCluster reads the cluster's objects and prints their tree.
func runDescribeCluster(ctx context.Context, c client.Client, out, errOut io.Writer, name string, o *describeOptions, now time.Time) error {
	if ctx == nil {
		ctx = context.Background()
	}
	switch o.output {
	case "", "json", "yaml":
	default:
		return fmt.Errorf("--output %q: use json or yaml, or leave it out for the table", o.output)
	}
	show, err := describe.ParseShowConditions(o.showConditions)
	if err != nil {
		return err
	}
	objs, err := describe.Read(ctx, c, c.RESTMapper(), o.target.namespace, name, func(what string, err error) {
		fmt.Fprintf(errOut, "Warning: %s: %v\n", what, err)
	})
	if err != nil {
		return err
	}
	tree := describe.Build(objs, describe.Options{ShowConditions: show, ShowMachineSets: o.showMachineSets, Grouping: o.grouping, Echo: o.echo})
	switch o.output {
	case "json":
		return describe.JSON(out, tree)
	case "yaml":
		return describe.YAML(out, tree)
	}
	return describe.Render(out, tree, now, o.color)
}
