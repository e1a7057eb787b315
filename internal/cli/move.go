package cli

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"capstan.dev/capstan/internal/move"
	"capstan.dev/capstan/internal/node/cloudinit"
	"capstan.dev/capstan/internal/scheme"
)

func init() { register(newMoveCommand) }

// defaultPauseTimeout is how long a move waits for the source's
// controllers to report the pause, unless told otherwise.
const defaultPauseTimeout = 2 * time.Minute

type moveOptions struct {
	kubeconfig    string
	toKubeconfig  string
	toDirectory   string
	fromDirectory string
	namespace     string
	dryRun        bool
	undo          bool
	pauseTimeout  time.Duration
	stepDelay     time.Duration
	allNamespaces bool
}

func newMoveCommand(g *globals) *cobra.Command {
	o := &moveOptions{}
	cmd := &cobra.Command{
		Use:   "move --to-kubeconfig PATH | --to-directory DIR | --from-directory DIR",
		Short: "Move workload clusters' objects to another management cluster, or to a directory and back",
		Long: `Move the Cluster API objects of the workload clusters in a namespace to another
management cluster (--to-kubeconfig), to a directory of YAML files
(--to-directory), or from such a directory into the management cluster
(--from-directory). The clusters are paused, every object of their graph is
copied in owner order with its status, every copy is compared with its source,
the source objects are deleted without running their finalizers, and the
clusters are unpaused where they now live. Machines keep running throughout.

Before it changes anything the move checks the target: that it serves every
kind, that its namespaces exist or can be made, that no object there holds a
name the move needs, and that it accepts every object (a server-side dry run;
for a directory, a probe file). A move that stops midway says what it changed.
An interrupted move continues when run again with the same flags; until it has
begun deleting from the source, the same flags with --undo take it back
instead: the copies go and the source is unpaused. The source
is --kubeconfig, else $KUBECONFIG, else the running capstan plane (as for get
and describe); --from-directory writes to it. Exit code 0 on success, 1 when the
move stopped (the message names the object and the step).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.run(cmd, g)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of the source management cluster (default: $KUBECONFIG, else the running capstan plane's)")
	f.StringVar(&o.toKubeconfig, "to-kubeconfig", "", "kubeconfig of the target management cluster")
	f.StringVar(&o.toDirectory, "to-directory", "", "write the objects as YAML files into this directory and delete them from the source")
	f.StringVar(&o.fromDirectory, "from-directory", "", "create the objects of a directory written by --to-directory in the management cluster")
	f.StringVarP(&o.namespace, "namespace", "n", "", "namespace of the clusters to move (default: the kubeconfig context's namespace, else default; with --from-directory, every object of the directory)")
	f.BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "move the clusters of every namespace")
	f.BoolVar(&o.dryRun, "dry-run", false, "print what would move, in order, and change nothing")
	f.BoolVar(&o.undo, "undo", false, "take back an unfinished move with these flags: remove its copies from the target and unpause the source")
	f.DurationVar(&o.pauseTimeout, "pause-timeout", defaultPauseTimeout, "how long to wait until the source's controllers report every object paused; 0 does not wait")
	f.DurationVar(&o.stepDelay, "step-delay", 0, "wait this long after each object written (for tests that interrupt a move)")
	_ = f.MarkHidden("step-delay")
	return cmd
}

func (o *moveOptions) run(cmd *cobra.Command, g *globals) error {
	modes := 0
	for _, s := range []string{o.toKubeconfig, o.toDirectory, o.fromDirectory} {
		if s != "" {
			modes++
		}
	}
	if modes != 1 {
		return errors.New("give exactly one of --to-kubeconfig, --to-directory and --from-directory")
	}
	if o.allNamespaces && o.namespace != "" {
		return errors.New("--namespace and --all-namespaces exclude each other")
	}
	if o.undo && o.dryRun {
		return errors.New("--undo and --dry-run exclude each other")
	}
	source := mgmtTarget{kubeconfig: o.kubeconfig}
	cfg, err := source.restConfig(g)
	if err != nil {
		return err
	}
	namespace := o.namespace
	// A directory holds what one move wrote: all of it comes back unless
	// a namespace is named.
	if namespace == "" && !o.allNamespaces && o.fromDirectory == "" {
		namespace = "default"
		if ns, _, err := clientConfig(source.loadingRules(g)).Namespace(); err == nil && ns != "" {
			namespace = ns
		}
	}
	current, err := moveClient(cfg)
	if err != nil {
		return source.kubeconfigError(source.loadingRules(g), err)
	}
	opts := move.Options{
		Namespace: namespace, DryRun: o.dryRun, Out: cmd.OutOrStdout(),
		PauseTimeout: o.pauseTimeout, StepDelay: o.stepDelay,
	}
	ctx := cmd.Context()
	return o.explain(namespace, func() error {
		switch {
		case o.toKubeconfig != "":
			cfg, err := clientcmd.BuildConfigFromFlags("", o.toKubeconfig)
			if err != nil {
				return fmt.Errorf("--to-kubeconfig %s: %w", o.toKubeconfig, err)
			}
			target, err := moveClient(cfg)
			if err != nil {
				return fmt.Errorf("--to-kubeconfig %s: %w", o.toKubeconfig, err)
			}
			if o.undo {
				return move.UndoToCluster(ctx, current, target, opts)
			}
			return move.ToCluster(ctx, current, target, opts)
		case o.toDirectory != "":
			if o.undo {
				return move.UndoToDirectory(ctx, current, o.toDirectory, opts)
			}
			return move.ToDirectory(ctx, current, o.toDirectory, opts)
		default:
			if o.undo {
				return move.UndoFromDirectory(ctx, o.fromDirectory, current, opts)
			}
			return move.FromDirectory(ctx, o.fromDirectory, current, opts)
		}
	}())
}

// explain adds to the error of a move that stopped after changing
// something the commands that finish it and, while it can be, undo it.
func (o *moveOptions) explain(namespace string, err error) error {
	var me *move.Error
	if !errors.As(err, &me) || len(me.Changed) == 0 {
		return err
	}
	again := o.commandLine(namespace)
	msg := fmt.Sprintf("%v\nTo finish the move, run it again:\n  %s", err, again)
	if o.undo {
		msg = fmt.Sprintf("%v\nTo finish the undo, run it again:\n  %s --undo", err, again)
	}
	if me.Undoable && !o.undo {
		msg += fmt.Sprintf("\nTo undo it instead (remove the copies, unpause the source):\n  %s --undo", again)
	}
	return errors.New(msg)
}

// commandLine is the move command with the flags that name its source,
// target and namespace, for a user to run again.
func (o *moveOptions) commandLine(namespace string) string {
	args := []string{"capstan", "move"}
	add := func(flag, value string) {
		if value != "" {
			args = append(args, flag, cloudinit.ShellQuote(value))
		}
	}
	add("--kubeconfig", o.kubeconfig)
	add("--to-kubeconfig", o.toKubeconfig)
	add("--to-directory", o.toDirectory)
	add("--from-directory", o.fromDirectory)
	switch {
	case o.allNamespaces:
		args = append(args, "--all-namespaces")
	default:
		add("--namespace", namespace)
	}
	if o.pauseTimeout != defaultPauseTimeout {
		add("--pause-timeout", o.pauseTimeout.String())
	}
	return strings.Join(args, " ")
}

// moveClient is a client for one end of a move, at a pace that leaves the
// API server room for its controllers.
func moveClient(cfg *rest.Config) (client.Client, error) {
	cfg.QPS, cfg.Burst = 50, 100
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", cfg.Host, err)
	}
	return c, nil
}
