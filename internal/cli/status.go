package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"capstan.dev/capstan/internal/mgmt"
)

// statusNotRunning is the exit code of `capstan status` when nothing runs,
// as service managers' status commands use it.
const statusNotRunning = 3

type statusReport struct {
	StateDir   string     `json:"stateDir"`
	Running    bool       `json:"running"`
	Ready      bool       `json:"ready"`
	PID        int        `json:"pid,omitempty"`
	Server     string     `json:"server,omitempty"`
	Kubeconfig string     `json:"kubeconfig,omitempty"`
	Since      *time.Time `json:"since,omitempty"`
	Version    string     `json:"version,omitempty"`
	Problem    string     `json:"problem,omitempty"`
	// Console is the web console's URL (with its access token), or why
	// the plane serves none.
	Console string `json:"console,omitempty"`
}

func newStatusCommand(g *globals) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Say whether the embedded management plane runs, where, and since when",
		Long: `Say whether the embedded management plane runs, where, and since when.
Exits 0 when it runs and answers, 1 when it runs but does not answer, 3 when it
does not run.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "" && output != "json" {
				return fmt.Errorf("-o %q: use json, or leave it out for text", output)
			}
			dir, err := g.dir()
			if err != nil {
				return err
			}
			r := collectStatus(cmd.Context(), dir)
			out := cmd.OutOrStdout()
			if output == "json" {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				if err := enc.Encode(r); err != nil {
					return err
				}
			} else {
				printStatus(cmd, r)
			}
			switch {
			case !r.Running:
				return exitError{code: statusNotRunning}
			case !r.Ready:
				return exitError{code: 1}
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: empty for text, or json")
	return cmd
}

func collectStatus(ctx context.Context, dir mgmt.StateDir) statusReport {
	r := statusReport{StateDir: string(dir)}
	running, pid := dir.Running()
	ri, riErr := dir.ReadRunInfo()
	if !running {
		if riErr == nil {
			r.Problem = fmt.Sprintf("the last run (pid %d) ended without a clean stop; `capstan up` recovers it", ri.PID)
		}
		return r
	}
	r.Running, r.PID = true, pid
	if riErr != nil || ri.PID != pid {
		r.Problem = "starting up"
		return r
	}
	since := ri.Since
	r.Server, r.Kubeconfig, r.Since, r.Version = ri.Server, ri.Kubeconfig, &since, ri.Version
	if record, err := readPlaneConsole(dir, pid); err == nil {
		r.Console = record.URL
		if r.Console == "" {
			r.Console = record.Problem
		}
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", ri.Kubeconfig)
	if err != nil {
		r.Problem = "kubeconfig: " + err.Error()
		return r
	}
	cfg.Timeout = 5 * time.Second
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		r.Problem = err.Error()
		return r
	}
	if ctx == nil {
		ctx = context.Background()
	}
	var code int
	res := client.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx).StatusCode(&code)
	if res.Error() != nil || code != 200 {
		r.Problem = fmt.Sprintf("the API server does not answer /readyz: %v", res.Error())
		return r
	}
	r.Ready = true
	return r
}

func printStatus(cmd *cobra.Command, r statusReport) {
	out := cmd.OutOrStdout()
	if !r.Running {
		fmt.Fprintf(out, "Capstan is not running (state dir %s).\n", r.StateDir)
		if r.Problem != "" {
			fmt.Fprintf(out, "Note: %s.\n", r.Problem)
		}
		return
	}
	state := "running"
	if !r.Ready {
		state = "running, not ready"
	}
	fmt.Fprintf(out, "Capstan is %s.\n", state)
	fmt.Fprintf(out, "  pid:        %d\n", r.PID)
	if r.Since != nil {
		fmt.Fprintf(out, "  since:      %s (%s ago)\n", r.Since.Format(time.RFC3339), time.Since(*r.Since).Round(time.Second))
		fmt.Fprintf(out, "  API server: %s\n", r.Server)
		fmt.Fprintf(out, "  kubeconfig: %s\n", r.Kubeconfig)
		fmt.Fprintf(out, "  version:    %s\n", r.Version)
		if r.Console != "" {
			fmt.Fprintf(out, "  console:    %s\n", r.Console)
		}
	}
	fmt.Fprintf(out, "  state dir:  %s\n", r.StateDir)
	if r.Problem != "" {
		fmt.Fprintf(out, "  problem:    %s\n", r.Problem)
	}
}
