package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"google.golang.org/grpc/grpclog"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	"capstan.dev/capstan/internal/bench"
	"capstan.dev/capstan/internal/chaos"
)

func init() { register(newBenchCommand) }

func newBenchCommand(_ *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure Capstan's controllers",
	}
	cmd.AddCommand(newBenchScaleCommand(), newBenchChaosCommand())
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
		keep    bool
	)
	cmd := &cobra.Command{
		Use:   "scale",
		Short: "Create N clusters of 1 control-plane + M worker simulated machines at once and report time to Running, API writes per Machine, conflicts, CPU and memory",
		Long: `scale starts its own management plane (or uses --kubeconfig), runs every
controller and the in-memory provider in this process, creates --clusters
clusters of one KubeadmControlPlane machine and --workers MachineDeployment
workers all at once, and waits until every Machine is Running. Writes and
conflicts come from the API server's own apiserver_request_total. With
--keep it then leaves the plane, the controllers and the clusters running
until interrupted, and prints the kubeconfig to reach them with (for
example to open the fleet in capstan ui).`,
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
			printed := false
			if keep {
				cfg.Hold = func(ctx context.Context, res *bench.Result) error {
					printed = true
					if err := printResult(cmd.OutOrStdout(), output, res); err != nil {
						return err
					}
					return holdUntilInterrupted(ctx, cmd.ErrOrStderr(), res)
				}
			}
			res, err := bench.Run(cmd.Context(), cfg)
			if res != nil && !printed {
				if perr := printResult(cmd.OutOrStdout(), output, res); perr != nil {
					return perr
				}
			}
			return err
		},
	}
	cmd.Flags().IntVar(&cfg.Clusters, "clusters", 10, "number of clusters (N)")
	cmd.Flags().IntVar(&cfg.Workers, "workers", 1, "worker machines per cluster (M), besides its one control-plane machine")
	cmd.Flags().StringVar((*string)(&cfg.KeyAlgorithm), "key-algorithm", "", "every cluster's kubeadm encryptionAlgorithm (RSA-2048, RSA-3072, RSA-4096, ECDSA-P256, ECDSA-P384); empty means kubeadm's default, RSA-2048")
	cmd.Flags().BoolVar(&cfg.Topology, "topology", false, "make each cluster a managed topology (spec.topology) of one shared ClusterClass of the same shape")
	cmd.Flags().StringVar(&delays, "delays", "default", "simulated start-up delays: default (machine 10s, others 2s, ±20%) or 0")
	cmd.Flags().StringVar(&cfg.Kubeconfig, "kubeconfig", "", "management cluster to use instead of starting one (the controllers still run in this process: stop any other Capstan manager there or give it a --watch-filter; the run's clusters are deleted afterwards)")
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table or json")
	cmd.Flags().BoolVar(&logs, "logs", false, "print the controllers' logs (klog, -v for more)")
	cmd.Flags().StringVar(&profile, "cpuprofile", "", "write this process's (the manager's) CPU profile to this file (go tool pprof)")
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Minute, "how long to wait for every Machine to be Running")
	cmd.Flags().BoolVar(&keep, "keep", false, "after the report, keep the plane, the controllers and the clusters running until interrupted (Ctrl-C), and print their kubeconfig (for capstan ui --kubeconfig)")
	return cmd
}

// holdUntilInterrupted says how to reach the kept fleet and waits for
// Ctrl-C or SIGTERM; the benchmark then stops what it started.
func holdUntilInterrupted(ctx context.Context, w io.Writer, res *bench.Result) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	fmt.Fprintf(w, "The plane, the controllers and the %d clusters (namespace %s) keep running until interrupted (Ctrl-C).\n", res.Clusters, res.Namespace)
	fmt.Fprintf(w, "kubeconfig: %s\n", res.Kubeconfig)
	fmt.Fprintf(w, "  capstan ui --kubeconfig %s\n", res.Kubeconfig)
	<-ctx.Done()
	return nil
}

func newBenchChaosCommand() *cobra.Command {
	var (
		cfg     chaos.Config
		output  string
		keepDir bool
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "chaos",
		Short: "Kill the manager and the plane at random points while in-memory clusters are created, scaled, upgraded and deleted, then check that everything converged",
		Long: `chaos starts a management plane (capstan up --controllers=false) and a separate
capstan manager with the in-memory provider, then goes through four phases:
create --clusters clusters (one control-plane machine, one worker), scale them
to three control-plane machines and two workers, roll every cluster to the next
patch version, and delete every other cluster. Meanwhile it kills the manager
--kills times with SIGKILL at random points (spread over the phases, from
--seed) and the plane --plane-kills times, starting each again. After each
phase it waits until the checks find nothing: no duplicates (more Machines than
wanted, two infrastructure or bootstrap objects per Machine), no orphans, no
stuck finalizers, every remaining cluster Available at its version and counts.
It prints the kills, each phase's time to converge, the findings by kind with
the objects they name, the API writes and the restarts, and exits 1 when
anything was found.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "table" && output != "json" {
				return fmt.Errorf("-o %q: use table or json", output)
			}
			if !cmd.Flags().Changed("seed") {
				cfg.Seed = chaos.NewSeed()
			}
			bin, err := os.Executable()
			if err != nil {
				return err
			}
			cfg.Binary = bin
			if cfg.Dir, err = chaos.Dir(""); err != nil {
				return err
			}
			if output == "table" {
				cfg.Progress = cmd.ErrOrStderr()
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			res, err := chaos.Run(ctx, cfg)
			if res != nil {
				if perr := printResult(cmd.OutOrStdout(), output, res); perr != nil {
					return perr
				}
			}
			failed := err != nil || res == nil || len(res.Findings) > 0
			if keepDir || failed {
				fmt.Fprintf(cmd.ErrOrStderr(), "The run's plane state and logs (plane.log, manager.log) are in %s.\n", cfg.Dir)
			} else {
				_ = os.RemoveAll(cfg.Dir)
			}
			if err != nil {
				return err
			}
			if len(res.Findings) > 0 {
				return fmt.Errorf("the chaos run (seed %d) found %d problems; run it again with --seed %d", cfg.Seed, len(res.Findings), cfg.Seed)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&cfg.Clusters, "clusters", 50, "number of in-memory clusters; every other one is deleted in the last phase")
	f.IntVar(&cfg.ManagerKills, "kills", 100, "how many times the manager is killed with SIGKILL, spread over the four phases")
	f.IntVar(&cfg.PlaneKills, "plane-kills", 1, "how many times the plane (capstan up) is killed with SIGKILL")
	f.Int64Var(&cfg.Seed, "seed", 0, "seed of the kill schedule (default: a random one, printed); the same seed gives the same schedule")
	f.DurationVar(&cfg.Gaps.MinAfter, "min-gap", time.Second, "shortest wait before a kill")
	f.DurationVar(&cfg.Gaps.MaxAfter, "max-gap", 5*time.Second, "longest wait before a kill")
	f.DurationVar(&cfg.Gaps.MaxDown, "max-down", time.Second, "longest time a killed process stays down")
	f.DurationVar(&cfg.MachineDelay, "machine-delay", 2*time.Second, "simulated boot of each machine (node, API server and etcd take a quarter of it each)")
	f.DurationVar(&cfg.PhaseTimeout, "phase-timeout", 15*time.Minute, "how long each phase may take to converge")
	f.DurationVar(&timeout, "timeout", 2*time.Hour, "how long the whole run may take")
	f.BoolVar(&keepDir, "keep", false, "keep the run's directory (plane state, plane.log, manager.log) even when nothing was found")
	f.StringVarP(&output, "output", "o", "table", "table or json")
	return cmd
}

// printResult writes a benchmark's result as indented JSON or as its table.
func printResult(w io.Writer, output string, res interface{ Table(io.Writer) }) error {
	if output == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	res.Table(w)
	return nil
}
