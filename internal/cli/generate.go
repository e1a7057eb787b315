package cli

import (
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"
	utilversion "k8s.io/apimachinery/pkg/util/version"
	"k8s.io/component-base/version"

	"capstan.dev/capstan/internal/templates"
)

// clusterTemplateOptions choose and fill a cluster template; `generate
// cluster` and `up --cluster` share them.
type clusterTemplateOptions struct {
	infrastructure    string
	flavor            string
	from              string
	config            string
	kubernetesVersion string
	controlPlanes     int
	workers           int
	namespace         string

	flags *pflag.FlagSet // tells which flags the user set
}

// Flags that set template variables, and the variables they set.
const (
	flagKubernetesVersion = "kubernetes-version"
	flagControlPlanes     = "control-plane-machine-count"
	flagWorkers           = "worker-machine-count"
	flagNamespace         = "target-namespace"

	varClusterName       = "CLUSTER_NAME"
	varNamespace         = "NAMESPACE"
	varKubernetesVersion = "KUBERNETES_VERSION"
	varControlPlanes     = "CONTROL_PLANE_MACHINE_COUNT"
	varWorkers           = "WORKER_MACHINE_COUNT"
)

func (o *clusterTemplateOptions) addFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	o.flags = f
	f.StringVar(&o.infrastructure, "infrastructure", "local", "infrastructure provider of the built-in templates: "+strings.Join(templates.Infrastructures(), ", "))
	f.StringVar(&o.flavor, "flavor", "", "template flavor: local has "+strings.Join(templates.Flavors("local"), ", ")+", in-memory has "+strings.Join(templates.Flavors("in-memory"), ", ")+", qemu has "+strings.Join(templates.Flavors("qemu"), ", ")+" (default: the provider's default template)")
	f.StringVar(&o.from, "from", "", "read the template from this file instead of a built-in one")
	f.StringVar(&o.config, "config", "", "YAML file of KEY: value template variables (default "+templates.DefaultConfigPath()+" when it exists)")
	f.StringVar(&o.kubernetesVersion, flagKubernetesVersion, embeddedKubernetesVersion(), "Kubernetes version of the machines ("+varKubernetesVersion+")")
	f.IntVar(&o.controlPlanes, flagControlPlanes, 1, "control-plane machines ("+varControlPlanes+"; default: the template's, else 1)")
	f.IntVar(&o.workers, flagWorkers, 2, "worker machines ("+varWorkers+"; default: the template's, else 2)")
	f.StringVarP(&o.namespace, flagNamespace, "n", "default", "namespace of the cluster's objects ("+varNamespace+")")
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
	return templates.Builtin(o.infrastructure, o.flavor)
}

func (o *clusterTemplateOptions) changed(flag string) bool {
	return o.flags != nil && o.flags.Changed(flag)
}

// variables returns the sources of the variables' values: lookup holds, in
// order, the flags the user set, the environment and the config file;
// fallback holds the flags' defaults, which count only below the template's
// own defaults (so that a flavor can choose, say, three control-plane
// machines).
func (o *clusterTemplateOptions) variables(name string) (lookup, fallback func(string) (string, bool), err error) {
	flagVars := map[string]string{varClusterName: name}
	defaultVars := map[string]string{}
	for _, v := range []struct{ flag, variable, value string }{
		{flagNamespace, varNamespace, o.namespace},
		{flagKubernetesVersion, varKubernetesVersion, o.kubernetesVersion},
		{flagControlPlanes, varControlPlanes, strconv.Itoa(o.controlPlanes)},
		{flagWorkers, varWorkers, strconv.Itoa(o.workers)},
	} {
		if o.changed(v.flag) {
			flagVars[v.variable] = v.value
		} else {
			defaultVars[v.variable] = v.value
		}
	}
	path, optional := o.config, false
	if path == "" {
		path, optional = templates.DefaultConfigPath(), true
	}
	fileVars := map[string]string{}
	if path != "" {
		if fileVars, err = templates.LoadConfig(path, optional); err != nil {
			return nil, nil, fmt.Errorf("--config: %w", err)
		}
	}
	lookup = func(k string) (string, bool) {
		if v, ok := flagVars[k]; ok {
			return v, true
		}
		if v, ok := os.LookupEnv(k); ok {
			return v, true
		}
		v, ok := fileVars[k]
		return v, ok
	}
	fallback = func(k string) (string, bool) { v, ok := defaultVars[k]; return v, ok }
	return lookup, fallback, nil
}

// render fills the template: flags the user set first, then the
// environment, then the config file, then the template's own defaults, then
// the flags' defaults. It leaves the options holding the values used, for
// callers that wait for the machines.
func (o *clusterTemplateOptions) render(name string) (string, error) {
	tmpl, err := o.template()
	if err != nil {
		return "", err
	}
	lookup, fallback, err := o.variables(name)
	if err != nil {
		return "", err
	}
	manifest, err := templates.RenderWithFallback(tmpl, lookup, fallback)
	if err != nil {
		return "", err
	}
	vars, err := templates.Variables(tmpl)
	if err != nil {
		return "", err
	}
	value := func(k string) string {
		if v, ok := lookup(k); ok {
			return v
		}
		if v, ok, _ := templates.Default(tmpl, k); ok {
			return v
		}
		v, _ := fallback(k)
		return v
	}
	if err := validateVariables(vars, value); err != nil {
		return "", err
	}
	if _, err := manifestObjects(manifest); err != nil {
		source := "the built-in template (--infrastructure " + o.infrastructure + ", --flavor " + o.flavor + ")"
		if o.from != "" {
			source = "--from " + o.from
		}
		return "", fmt.Errorf("%s does not render to Kubernetes objects: %w", source, err)
	}
	for _, c := range []struct {
		variable string
		into     *int
	}{
		{varControlPlanes, &o.controlPlanes},
		{varWorkers, &o.workers},
	} {
		if _, used := vars[c.variable]; used {
			*c.into, _ = strconv.Atoi(value(c.variable)) // validated above
		}
	}
	if _, used := vars[varNamespace]; used {
		o.namespace = value(varNamespace)
	}
	return manifest, nil
}

// Variables of the built-in templates that no flag sets.
const (
	varPodCIDR          = "POD_CIDR"
	varServiceCIDR      = "SERVICE_CIDR"
	varMachineBootDelay = "MACHINE_BOOT_DELAY"
	// The QEMU templates' machine sizes.
	varControlPlaneCPUs      = "CONTROL_PLANE_MACHINE_CPUS"
	varControlPlaneMemoryMiB = "CONTROL_PLANE_MACHINE_MEMORY_MIB"
	varWorkerCPUs            = "WORKER_MACHINE_CPUS"
	varWorkerMemoryMiB       = "WORKER_MACHINE_MEMORY_MIB"
	// The QEMU template's MachineHealthCheck of its workers.
	varWorkerNodeStartupTimeout = "WORKER_NODE_STARTUP_TIMEOUT_SECONDS"
	varWorkerUnhealthyTimeout   = "WORKER_UNHEALTHY_TIMEOUT_SECONDS"
)

// variableSource names where a variable's value can be set, for errors.
func variableSource(variable string) string {
	switch variable {
	case varClusterName:
		return "the NAME argument"
	case varNamespace:
		return "--" + flagNamespace + " (" + variable + ")"
	case varKubernetesVersion:
		return "--" + flagKubernetesVersion + " (" + variable + ")"
	case varControlPlanes:
		return "--" + flagControlPlanes + " (" + variable + ")"
	case varWorkers:
		return "--" + flagWorkers + " (" + variable + ")"
	}
	return variable + " (environment or --config)"
}

// validateVariables checks the values of the well-known variables a
// template uses, all of them, before anything is printed or applied: the
// API server would refuse some objects of the cluster and accept others,
// leaving half a cluster. value gives a variable's value as rendered.
func validateVariables(used map[string]string, value func(string) string) error {
	var errs []error
	bad := func(variable, why string) {
		errs = append(errs, fmt.Errorf("%s %q: %s", variableSource(variable), value(variable), why))
	}
	has := func(v string) bool { _, ok := used[v]; return ok }
	for _, v := range []string{varClusterName, varNamespace} {
		if !has(v) {
			continue
		}
		if problems := validation.IsDNS1123Label(value(v)); len(problems) > 0 {
			bad(v, "must be a DNS label: "+strings.Join(problems, "; "))
		}
	}
	if has(varKubernetesVersion) {
		v := value(varKubernetesVersion)
		if _, err := utilversion.ParseSemantic(v); err != nil || !strings.HasPrefix(v, "v") {
			bad(varKubernetesVersion, "must be a Kubernetes release version with a leading v, such as "+embeddedKubernetesVersion())
		}
	}
	for _, c := range []struct {
		variable string
		min      int
		why      string
	}{
		{varControlPlanes, 1, "must be at least 1: a cluster needs a control-plane machine"},
		{varWorkers, 0, "must not be negative"},
		{varControlPlaneCPUs, 1, "must be at least 1: a VM needs a CPU"},
		{varWorkerCPUs, 1, "must be at least 1: a VM needs a CPU"},
		{varControlPlaneMemoryMiB, 1024, "must be at least 1024: a Kubernetes node does not fit in less than 1 GiB"},
		{varWorkerMemoryMiB, 1024, "must be at least 1024: a Kubernetes node does not fit in less than 1 GiB"},
		{varWorkerNodeStartupTimeout, 0, "must not be negative"},
		{varWorkerUnhealthyTimeout, 0, "must not be negative"},
	} {
		if !has(c.variable) {
			continue
		}
		text := value(c.variable)
		n, err := strconv.Atoi(text)
		switch {
		// Only plain decimal digits: YAML reads 011 as the octal 9, and
		// the count printed must be the count checked.
		case err != nil || strconv.Itoa(n) != text:
			bad(c.variable, "must be a whole number in plain decimal digits, such as 3")
		case n > math.MaxInt32:
			bad(c.variable, fmt.Sprintf("must be at most %d, the largest replica count the API takes", math.MaxInt32))
		case n < c.min:
			bad(c.variable, c.why)
		case c.variable == varWorkerNodeStartupTimeout && n > 0 && n < 30:
			bad(c.variable, "must be 0 (no limit) or at least 30: a node needs that long to start")
		case c.variable == varControlPlanes && n%2 == 0:
			bad(c.variable, fmt.Sprintf("must be odd, so that etcd keeps a quorum when a machine fails: use %d or %d", n-1, n+1))
		}
	}
	for _, v := range []string{varPodCIDR, varServiceCIDR} {
		if !has(v) {
			continue
		}
		if _, _, err := net.ParseCIDR(value(v)); err != nil {
			bad(v, "must be a CIDR block such as 10.244.0.0/16")
		}
	}
	if has(varMachineBootDelay) {
		if d, err := time.ParseDuration(value(varMachineBootDelay)); err != nil || d < 0 {
			bad(varMachineBootDelay, "must be a duration that is not negative, such as 10s")
		}
	}
	return errors.Join(errs...)
}

func newGenerateCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "generate", Short: "Generate manifests, such as a cluster from a template"}
	o := &clusterTemplateOptions{}
	var listVariables bool
	cluster := &cobra.Command{
		Use:   "cluster NAME",
		Short: "Print the manifests of a workload cluster, ready for kubectl apply -f -",
		Long: `Print the manifests of a workload cluster, ready for kubectl apply -f -.

The template's ${VAR} and ${VAR:=default} references are filled from, in this
order: the flags given, the environment, the --config file (top-level
KEY: value pairs), the template's defaults and the flags' defaults. A variable
with no value is an error that names it; nothing is printed then.

The topology flavor prints the provider's built-in ClusterClass (capstan-local
or capstan-in-memory: the same in every namespace, so applying it again
changes nothing) and a Cluster built from it through spec.topology.`,
		Example: `  capstan generate cluster demo | kubectl apply -f -
  capstan generate cluster prod --flavor ha --worker-machine-count 3
  capstan generate cluster managed --flavor topology | kubectl apply -f -
  capstan generate cluster other --from my-template.yaml --list-variables`,
		Args: exactArgs("NAME"),
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
				lookup, fallback, err := o.variables(args[0])
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
					def, hasDefault, _ := templates.Default(tmpl, n)
					if !hasDefault {
						def, hasDefault = fallback(n)
					}
					// Values are not shown: a variable may hold a secret.
					_, set := lookup(n)
					switch {
					case n == varClusterName:
						fmt.Fprintf(out, "  - %s (the NAME argument)\n", n)
					case set:
						fmt.Fprintf(out, "  - %s (set by a flag, the environment or the config file)\n", n)
					case hasDefault:
						fmt.Fprintf(out, "  - %s (default %q)\n", n, def)
					default:
						fmt.Fprintf(out, "  - %s (required)\n", n)
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
