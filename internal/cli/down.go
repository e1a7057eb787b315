package cli

import (
	"fmt"
	"syscall"
	"time"

	"github.com/spf13/cobra"
)

func newDownCommand(g *globals) *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "down",
		Short: "Stop the embedded management plane, keeping its state for the next up",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir, err := g.dir()
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			running, pid := dir.Running()
			if !running {
				fmt.Fprintf(out, "Capstan is not running (state dir %s).\n", dir)
				return nil
			}
			if pid <= 0 {
				return fmt.Errorf("state directory %s is locked but its lock file names no process; is another capstan starting?", dir)
			}
			if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
				return fmt.Errorf("stopping capstan process %d: %w", pid, err)
			}
			deadline := time.Now().Add(timeout)
			for time.Now().Before(deadline) {
				if still, _ := dir.Running(); !still {
					fmt.Fprintf(out, "Capstan stopped (pid %d). State kept in %s; `capstan up%s` resumes it.\n", pid, dir, stateDirFlag(dir))
					return nil
				}
				time.Sleep(100 * time.Millisecond)
			}
			// etcd's write-ahead log makes a kill safe: the next up recovers.
			_ = syscall.Kill(pid, syscall.SIGKILL)
			fmt.Fprintf(out, "Capstan (pid %d) did not stop within %s and was killed; the next up recovers its state.\n", pid, timeout)
			return nil
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", time.Minute, "how long to wait for a clean stop before killing the process")
	return cmd
}
