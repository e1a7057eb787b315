package cli

import (
	"errors"

	"github.com/spf13/cobra"
)

func newNodeLBCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "lb",
		Short: "Run a local cluster's control-plane load balancer from its directory",
		RunE:  func(*cobra.Command, []string) error { return errors.New("not implemented yet") },
	}
}
