package cli

import "github.com/spf13/cobra"

// newNodeCommand groups what runs on a local machine rather than in the
// management plane: the machine itself and its cluster's load balancer. The
// local infrastructure provider starts these; users do not.
func newNodeCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:    "node",
		Short:  "Run a local provider machine or load balancer (started by the local provider)",
		Hidden: true,
	}
	cmd.AddCommand(newNodeRunCommand(), newNodeLBCommand())
	return cmd
}
