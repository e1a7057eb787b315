package cli

import (
	"fmt"
	"os"
	"sort"
	"strconv"

	"github.com/spf13/cobra"
	"k8s.io/component-base/version"

	"capstan.dev/capstan/internal/templates"
)

// clusterTemplateOptions choose and fill a cluster template; `generate
// cluster` and `up --cluster` share them.
type clusterTemplateOptions struct {
	infrastructure    string
	flavor            string
	from              string
	kubernetesVersion string
	controlPlanes     int
	workers           int
	namespace         string
}

func (o *clusterTemplateOptions) addFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&o.infrastructure, "infrastructure", "local", "infrastructure provider of the built-in templates")
	f.StringVar(&o.flavor, "flavor", "", "template flavor (default: the provider's default template)")
	f.StringVar(&o.from, "from", "", "read the template from this file instead of a built-in one")
	f.StringVar(&o.kubernetesVersion, "kubernetes-version", embeddedKubernetesVersion(), "Kubernetes version of the machines (KUBERNETES_VERSION)")
	f.IntVar(&o.controlPlanes, "control-plane-machine-count", 1, "control-plane machines (CONTROL_PLANE_MACHINE_COUNT)")
	f.IntVar(&o.workers, "worker-machine-count", 2, "worker machines (WORKER_MACHINE_COUNT)")
	f.StringVarP(&o.namespace, "target-namespace", "n", "default", "namespace of the cluster's objects (NAMESPACE)")
}

// embeddedKubernetesVersion is the version of the API server a local
// machine runs, which is also the sensible default for its kubelets.
func embeddedKubernetesVersion() string {
	if v := version.Get().GitVersion; v != "" && v != "v0.0.0-master+$Format:%H$" {
		return v
	}
	return "v1.35.8"
}

func (o *clusterTemplateOptions) template() (string, error) {
	if o.from != "" {
		b, err := os.ReadFile(o.from)
		if err != nil {
			return "", fmt.Errorf("--from: %w", err)
		}
		return string(b), nil
	}
	if o.infrastructure != "local" {
		return "", fmt.Errorf("--infrastructure %q: the built-in templates are for \"local\"; use --from for other providers", o.infrastructure)
	}
	return templates.Local(o.flavor)
}

// render fills the template: flags first, then the environment, then the
// template's own defaults.
func (o *clusterTemplateOptions) render(name string) (string, error) {
	tmpl, err := o.template()
	if err != nil {
		return "", err
	}
	if o.controlPlanes < 1 {
		return "", fmt.Errorf("--control-plane-machine-count %d: a cluster needs at least one control-plane machine", o.controlPlanes)
	}
	if o.workers < 0 {
		return "", fmt.Errorf("--worker-machine-count %d: must not be negative", o.workers)
	}
	vars := map[string]string{
		"CLUSTER_NAME":                name,
		"NAMESPACE":                   o.namespace,
		"KUBERNETES_VERSION":          o.kubernetesVersion,
		"CONTROL_PLANE_MACHINE_COUNT": strconv.Itoa(o.controlPlanes),
		"WORKER_MACHINE_COUNT":        strconv.Itoa(o.workers),
	}
	return templates.Render(tmpl, func(k string) (string, bool) {
		if v, ok := vars[k]; ok {
			return v, true
		}
		return os.LookupEnv(k)
	})
}

func newGenerateCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "generate", Short: "Generate manifests, such as a cluster from a template"}
	o := &clusterTemplateOptions{}
	var listVariables bool
	cluster := &cobra.Command{
		Use:   "cluster NAME",
		Short: "Print the manifests of a workload cluster, ready for kubectl apply -f -",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			if listVariables {
				tmpl, err := o.template()
				if err != nil {
					return err
				}
				vars, err := templates.Variables(tmpl)
				if err != nil {
					return err
				}
				names := make([]string, 0, len(vars))
				for n := range vars {
					names = append(names, n)
				}
				sort.Strings(names)
				fmt.Fprintln(out, "Variables:")
				for _, n := range names {
					if vars[n] != "" {
						fmt.Fprintf(out, "  - %s (default %q)\n", n, vars[n])
					} else {
						fmt.Fprintf(out, "  - %s\n", n)
					}
				}
				return nil
			}
			manifest, err := o.render(args[0])
			if err != nil {
				return err
			}
			_, err = fmt.Fprint(out, manifest)
			return err
		},
	}
	o.addFlags(cluster)
	cluster.Flags().BoolVar(&listVariables, "list-variables", false, "list the variables the template uses and exit")
	cmd.AddCommand(cluster)
	return cmd
}
