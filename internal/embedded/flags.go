package embedded

import (
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/pflag"
)

// FlagArgs renders extra arguments the way a user writes them on a command
// line (--name=value), sorted so that the result is stable.
func FlagArgs(extra map[string]string) []string {
	names := make([]string, 0, len(extra))
	for name := range extra {
		names = append(names, name)
	}
	sort.Strings(names)
	args := make([]string, 0, len(names))
	for _, name := range names {
		args = append(args, "--"+strings.TrimPrefix(name, "--")+"="+extra[name])
	}
	return args
}

func newFlagSet(component string) *pflag.FlagSet {
	fs := pflag.NewFlagSet(component, pflag.ContinueOnError)
	// Errors are returned, never printed with a usage text to stderr.
	fs.Usage = func() {}
	fs.SetOutput(discard{})
	return fs
}

// parseFlags parses args into fs; an unknown or malformed flag is an error
// naming the component, so a user's extraArgs typo points at where to look.
func parseFlags(component string, fs *pflag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%s flags: %w (check the %s extra arguments)", component, err, component)
	}
	if rest := fs.Args(); len(rest) > 0 {
		return fmt.Errorf("%s flags: unexpected arguments %q; every argument must be a --flag=value", component, rest)
	}
	return nil
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
