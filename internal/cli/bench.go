package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"google.golang.org/grpc/grpclog"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	"capstan.dev/capstan/internal/bench"
)

func init() { register(newBenchCommand) }

func newBenchCommand(_ *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure Capstan's controllers",
	}
	cmd.AddCommand(newBenchScaleCommand())
	return cmd
}

func newBenchScaleCommand() *cobra.Command {
	var (
		cfg     bench.Config
		delays  string
		output  string
		logs    bool
		timeout time.Duration
		profile string
	)
	cmd := &cobra.Command{
		Use:   "scale",
		Short: "Create N clusters of 1 control-plane + M worker simulated machines at once and report time to Running, API writes per Machine, conflicts, CPU and memory",
		Long: `scale starts its own management plane (or uses --kubeconfig), runs every
controller and the in-memory provider in this process, creates --clusters
clusters of one KubeadmControlPlane machine and --workers MachineDeployment
workers all at once, and waits until every Machine is Running. Writes and
conflicts come from the API server's own apiserver_request_total.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch delays {
			case "default":
			case "0":
				cfg.NoDelays = true
			default:
				return fmt.Errorf("--delays %q: use default (machine 10s, node/API server/etcd 2s, ±20%%) or 0", delays)
			}
			if output != "table" && output != "json" {
				return fmt.Errorf("-o %q: use table or json", output)
			}
			if logs {
				ctrl.SetLogger(klog.NewKlogr())
			} else {
				ctrl.SetLogger(logr.Discard())
				// etcd clients of the control-plane controller report
				// connections they close themselves as warnings.
				grpclog.SetLoggerV2(grpclog.NewLoggerV2(io.Discard, io.Discard, io.Discard))
			}
			cfg.Timeout = timeout
			if profile != "" {
				f, err := os.Create(profile)
				if err != nil {
					return fmt.Errorf("--cpuprofile: %w", err)
				}
				defer f.Close()
				if err := pprof.StartCPUProfile(f); err != nil {
					return fmt.Errorf("--cpuprofile: %w", err)
				}
				defer pprof.StopCPUProfile()
			}
			if output == "table" {
				cfg.Progress = cmd.ErrOrStderr()
			}
			res, err := bench.Run(cmd.Context(), cfg)
			if res != nil {
				if output == "json" {
					enc := json.NewEncoder(cmd.OutOrStdout())
					enc.SetIndent("", "  ")
					if jerr := enc.Encode(res); jerr != nil {
						return jerr
					}
				} else {
					res.Table(cmd.OutOrStdout())
				}
			}
			return err
		},
	}
	cmd.Flags().IntVar(&cfg.Clusters, "clusters", 10, "number of clusters (N)")
	cmd.Flags().IntVar(&cfg.Workers, "workers", 1, "worker machines per cluster (M), besides its one control-plane machine")
	cmd.Flags().BoolVar(&cfg.Topology, "topology", false, "make each cluster a managed topology (spec.topology) of one shared ClusterClass of the same shape")
	cmd.Flags().StringVar(&delays, "delays", "default", "simulated start-up delays: default (machine 10s, others 2s, ±20%) or 0")
	cmd.Flags().StringVar(&cfg.Kubeconfig, "kubeconfig", "", "management cluster to use instead of starting one (the controllers still run in this process: stop any other Capstan manager there or give it a --watch-filter; the run's clusters are deleted afterwards)")
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table or json")
	cmd.Flags().BoolVar(&logs, "logs", false, "print the controllers' logs (klog, -v for more)")
	cmd.Flags().StringVar(&profile, "cpuprofile", "", "write this process's (the manager's) CPU profile to this file (go tool pprof)")
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Minute, "how long to wait for every Machine to be Running")
	return cmd
}
