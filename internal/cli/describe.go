package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/contract"
	"capstan.dev/capstan/internal/describe"
	"capstan.dev/capstan/internal/scheme"
)

func init() { register(newDescribeCommand) }

// mgmtTarget is the management cluster a command reads and writes:
// --kubeconfig, else $KUBECONFIG, else the embedded plane when it runs, else
// ~/.kube/config. The first two come first, as in kubectl and clusterctl, so
// a cluster the user named is never passed over for the one running here.
type mgmtTarget struct {
	kubeconfig string
	namespace  string
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
	if os.Getenv(clientcmd.RecommendedConfigPathEnvVar) != "" {
		return clientcmd.NewDefaultClientConfigLoadingRules()
	}
	if running, _ := g.dir().Running(); running {
		return &clientcmd.ClientConfigLoadingRules{ExplicitPath: g.dir().KubeconfigPath()}
	}
	return clientcmd.NewDefaultClientConfigLoadingRules()
}

// kubeconfigPath is the file loadingRules reads first: what to hand another
// program that must reach the same management cluster.
func (m *mgmtTarget) kubeconfigPath(g *globals) string {
	rules := m.loadingRules(g)
	if rules.ExplicitPath != "" {
		return rules.ExplicitPath
	}
	if p := rules.GetLoadingPrecedence(); len(p) > 0 {
		return p[0]
	}
	return ""
}

// clientConfig is the management cluster's kubeconfig, found by
// loadingRules: its REST config, and its context's namespace.
func clientConfig(rules *clientcmd.ClientConfigLoadingRules) clientcmd.ClientConfig {
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{})
}

func (m *mgmtTarget) restConfig(g *globals) (*rest.Config, error) {
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
	objs, err := readClusterObjects(ctx, c, o.target.namespace, name, errOut)
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

// readClusterObjects reads the Cluster and what belongs to it. Provider
// objects that cannot be read are left out (the tree says they do not
// exist) with a warning on errOut; only a missing Cluster is an error.
func readClusterObjects(ctx context.Context, c client.Client, namespace, name string, errOut io.Writer) (describe.Objects, error) {
	o := describe.Objects{Cluster: &clusterv1.Cluster{},
		InfrastructureMachines: map[string]*unstructured.Unstructured{}, BootstrapConfigs: map[string]*unstructured.Unstructured{},
		InfrastructureMachinePools: map[string]*unstructured.Unstructured{}}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, o.Cluster); err != nil {
		if apierrors.IsNotFound(err) {
			return o, fmt.Errorf("cluster %s not found in namespace %s: list the clusters with kubectl get clusters -A, and pass -n NAMESPACE", name, namespace)
		}
		return o, fmt.Errorf("reading Cluster %s/%s: %w", namespace, name, err)
	}
	resolver := &contract.Resolver{Reader: c}
	warn := func(what string, err error) {
		if !apierrors.IsNotFound(err) {
			fmt.Fprintf(errOut, "Warning: %s: %v\n", what, err)
		}
	}
	if ref := o.Cluster.Spec.InfrastructureRef; ref.Name != "" {
		obj, err := resolver.Get(ctx, c, ref, namespace)
		if err != nil {
			warn("reading the cluster's infrastructure "+ref.Kind+" "+ref.Name, err)
		} else {
			o.Infrastructure = obj
		}
	}
	if ref := o.Cluster.Spec.ControlPlaneRef; ref.Name != "" {
		obj, err := resolver.Get(ctx, c, ref, namespace)
		if err != nil {
			warn("reading the cluster's control plane "+ref.Kind+" "+ref.Name, err)
		} else {
			o.ControlPlane = obj
		}
	}
	inCluster := []client.ListOption{client.InNamespace(namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: name}}
	mds := &clusterv1.MachineDeploymentList{}
	if err := c.List(ctx, mds, inCluster...); err != nil {
		return o, fmt.Errorf("listing MachineDeployments: %w", err)
	}
	o.MachineDeployments = mds.Items
	sets := &clusterv1.MachineSetList{}
	if err := c.List(ctx, sets, inCluster...); err != nil {
		return o, fmt.Errorf("listing MachineSets: %w", err)
	}
	o.MachineSets = sets.Items
	pools := &clusterv1.MachinePoolList{}
	if err := c.List(ctx, pools, inCluster...); err != nil {
		return o, fmt.Errorf("listing MachinePools: %w", err)
	}
	o.MachinePools = pools.Items
	machines := &clusterv1.MachineList{}
	if err := c.List(ctx, machines, inCluster...); err != nil {
		return o, fmt.Errorf("listing Machines: %w", err)
	}
	o.Machines = machines.Items

	// One list per provider kind rather than one read per Machine.
	byKind := map[schema.GroupKind]map[string]*unstructured.Unstructured{}
	lookup := func(ref clusterv1.ContractVersionedObjectReference) *unstructured.Unstructured {
		if ref.Name == "" {
			return nil
		}
		gk := schema.GroupKind{Group: ref.APIGroup, Kind: ref.Kind}
		objs, seen := byKind[gk]
		if !seen {
			objs = map[string]*unstructured.Unstructured{}
			byKind[gk] = objs
			gvk, err := resolver.GroupVersionKind(ctx, ref)
			if err != nil {
				warn("resolving "+ref.Kind, err)
				return nil
			}
			list := &unstructured.UnstructuredList{}
			list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
			if err := c.List(ctx, list, client.InNamespace(namespace)); err != nil {
				warn("listing "+ref.Kind+"s", err)
				return nil
			}
			for i := range list.Items {
				objs[list.Items[i].GetName()] = &list.Items[i]
			}
		}
		return objs[ref.Name]
	}
	for _, mp := range o.MachinePools {
		if obj := lookup(mp.Spec.Template.Spec.InfrastructureRef); obj != nil {
			o.InfrastructureMachinePools[mp.Name] = obj
		}
	}
	for _, m := range o.Machines {
		if obj := lookup(m.Spec.InfrastructureRef); obj != nil {
			o.InfrastructureMachines[m.Name] = obj
		}
		if obj := lookup(m.Spec.Bootstrap.ConfigRef); obj != nil {
			o.BootstrapConfigs[m.Name] = obj
		}
	}
	return o, nil
}
