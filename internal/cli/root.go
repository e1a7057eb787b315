package cli

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/klog/v2"

	"capstan.dev/capstan/internal/mgmt"
)

// exitError carries a process exit code chosen by a command; its message,
// if any, has already been printed.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// Main runs the capstan command line and returns the process exit code.
func Main(args []string) int {
	// Kubernetes' version flag registers itself on the process-wide flag set,
	// which cobra merges into every command; capstan has its own command.
	if f := pflag.CommandLine.Lookup("version"); f != nil {
		f.Hidden = true
	}
	root := newRoot()
	root.SetArgs(args)
	err := root.Execute()
	var exit exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		return exit.code
	default:
		fmt.Fprintln(os.Stderr, "Error:", err)
		return 1
	}
}

// globals are the flags every command shares.
type globals struct {
	stateDir string
	// stateDirFlag is --state-dir itself, to tell a directory named on
	// the command line from the default.
	stateDirFlag *pflag.Flag
}

// stateDirNamed tells whether --state-dir was given on the command line.
func (g *globals) stateDirNamed() bool { return g.stateDirFlag != nil && g.stateDirFlag.Changed }

// dir is the state directory of --state-dir, or an error that says how to
// name one when there is no default (no $HOME): a guessed shared directory
// such as one in /tmp could be another user's.
func (g *globals) dir() (mgmt.StateDir, error) {
	if g.stateDir == "" {
		return "", errors.New("no state directory: $CAPSTAN_STATE_DIR, $XDG_STATE_HOME and $HOME are unset; pass --state-dir DIR")
	}
	return mgmt.StateDir(g.stateDir), nil
}

func newRoot() *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:           "capstan",
		Short:         "Cluster API in one binary: create, scale, upgrade and delete Kubernetes clusters",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVar(&g.stateDir, "state-dir", mgmt.DefaultStateDir(),
		"directory that holds the embedded management plane's state (env CAPSTAN_STATE_DIR)")
	g.stateDirFlag = root.PersistentFlags().Lookup("state-dir")
	klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogFlags)
	root.PersistentFlags().AddGoFlag(klogFlags.Lookup("v"))

	root.AddCommand(newUpCommand(g), newDownCommand(g), newStatusCommand(g), newManagerCommand(), newVersionCommand(), newNodeCommand(), newGenerateCommand())
	for _, add := range registered {
		root.AddCommand(add(g))
	}
	return root
}

// registered are the commands that register themselves from their own file
// with register, so that each command lives in one file and the root's list
// needs no edit when a command is added.
var registered []func(*globals) *cobra.Command

func register(newCommand func(*globals) *cobra.Command) {
	registered = append(registered, newCommand)
}

// exactArgs is cobra.ExactArgs with an error that names the arguments the
// command takes (its usage line's words), not only how many.
func exactArgs(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) == len(names) {
			return nil
		}
		return fmt.Errorf("%s takes %s (%d argument(s)); got %d: %q (see %s --help)",
			cmd.CommandPath(), strings.Join(names, " "), len(names), len(args), args, cmd.CommandPath())
	}
}
