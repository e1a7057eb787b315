package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"capstan.dev/capstan/internal/version"
)

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print Capstan's version and the embedded Kubernetes version",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintf(cmd.OutOrStdout(), "capstan %s (kubernetes %s)\n", version.Version, version.Kubernetes())
		},
	}
}
