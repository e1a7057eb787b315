package cli

import (
	"errors"

	"github.com/spf13/cobra"
)

func newNodeRunCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "run",
		Short: "Boot and run one local machine from its directory",
		RunE:  func(*cobra.Command, []string) error { return errors.New("not implemented yet") },
	}
}
