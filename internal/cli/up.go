package cli

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	"capstan.dev/capstan/internal/console"
	"capstan.dev/capstan/internal/deploy"
	"capstan.dev/capstan/internal/inventory"
	"capstan.dev/capstan/internal/manager"
	"capstan.dev/capstan/internal/mgmt"
	"capstan.dev/capstan/internal/providers/inmemory"
	"capstan.dev/capstan/internal/providers/local"
	"capstan.dev/capstan/internal/providers/qemu"
	"capstan.dev/capstan/internal/version"
	"capstan.dev/capstan/internal/webhook"
)

type upOptions struct {
	foreground  bool
	apiPort     int
	timeout     time.Duration
	notifyFD    int
	controllers bool
	// localDir is the local provider's machine directory; empty means
	// <state-dir>/local. Two planes given the same directory can hand
	// machines to each other (capstan move) without restarting them.
	localDir string
	// qemuImageCache is where the QEMU provider keeps built guest images;
	// empty means under <state-dir>/qemu. A cache shared by planes builds
	// the image (minutes) once.
	qemuImageCache string
	// inMemory runs the in-memory provider too: simulated machines, for
	// many clusters at once.
	inMemory bool
	// cluster, when set, is a workload cluster to create once the plane is
	// ready, from the template options.
	cluster        string
	clusterTimeout time.Duration
	template       clusterTemplateOptions
	// backupEvery, when not zero, takes a snapshot of the plane at this
	// interval into backupDir, keeping the newest backupKeep.
	backupEvery   time.Duration
	backupKeep    int
	backupDir     string
	backupKeyFile string
	// uiPort is the loopback port of the web console the plane serves with
	// its admin credentials; 0 serves none.
	uiPort int
}

// qemuClusterTimeout is --cluster-timeout's default for a cluster of QEMU
// virtual machines: docs/qemu-provider.md measures a 1+1 cluster of real
// nodes in 6 to 10 minutes on two cores, and the node image's first build
// (Kubernetes compiled from the module proxy) in 15 to 25.
const qemuClusterTimeout = 45 * time.Minute

func newUpCommand(g *globals) *cobra.Command {
	o := &upOptions{}
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Start the embedded management plane (etcd, kube-apiserver, CRDs) and write its kubeconfig",
		Long: `Start Capstan's embedded management plane: a real etcd and kube-apiserver inside
the capstan process, with Capstan's CRDs installed. By default capstan detaches
once the plane is ready and returns the shell; --foreground keeps it attached
(for service managers). State, including every object, survives down and up.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.checkFlags(); err != nil {
				return err
			}
			if !cmd.Flags().Changed("cluster-timeout") && o.template.infrastructure == "qemu" {
				// Virtual machines under software emulation boot in
				// minutes, after the guest image's first build.
				o.clusterTimeout = qemuClusterTimeout
			}
			dir, err := g.dir()
			if err != nil {
				return err
			}
			schedule, err := scheduledBackups(dir, o)
			if err != nil {
				return err
			}
			if schedule != nil && o.backupKeyFile == "" {
				fmt.Fprintf(cmd.ErrOrStderr(), "Warning: the scheduled backups in %s are not encrypted and not authenticated: each holds the plane's etcd data "+
					"(every object and Secret), the key that encrypts those Secrets at rest, and the plane's CA and service-account keys. "+
					"Keep the directory private, or pass --backup-encryption-key-file.\n", schedule.Dir)
			}
			if o.cluster != "" {
				// A cluster that cannot be made is said before the plane
				// starts, not after it has half-applied.
				if _, err := o.template.render(o.cluster); err != nil {
					return fmt.Errorf("--cluster %s: %w", o.cluster, err)
				}
			}
			if o.foreground {
				return runForeground(cmd, dir, o)
			}
			return runDetached(cmd, dir, o)
		},
	}
	cmd.Flags().BoolVar(&o.foreground, "foreground", false, "stay attached until interrupted instead of detaching once ready")
	cmd.Flags().IntVar(&o.apiPort, "api-port", 0, "loopback port for the API server (default: chosen on first start, then remembered)")
	cmd.Flags().DurationVar(&o.timeout, "timeout", 5*time.Minute, "how long to wait for the plane to become ready")
	cmd.Flags().BoolVar(&o.controllers, "controllers", true, "run Capstan's controllers in this process; turn off when a separate `capstan manager` runs them")
	cmd.Flags().StringVar(&o.localDir, "local-dir", "", "directory of the local provider's machines (default <state-dir>/local); planes that share it can move clusters between them without restarting machines")
	cmd.Flags().StringVar(&o.qemuImageCache, "qemu-image-cache", "", "directory of the QEMU provider's built guest images (default <state-dir>/qemu/_images); planes that share it build the image once")
	cmd.Flags().BoolVar(&o.inMemory, "in-memory", true, "also run the in-memory provider (simulated machines; capstan generate cluster --infrastructure in-memory)")
	cmd.Flags().StringVar(&o.cluster, "cluster", "", "also create a workload cluster of this name (on --infrastructure, the local provider by default) and wait until its nodes are Ready")
	cmd.Flags().DurationVar(&o.clusterTimeout, "cluster-timeout", 10*time.Minute, "how long to wait for the --cluster workload cluster ("+qemuClusterTimeout.String()+" by default with --infrastructure qemu)")
	o.template.addFlags(cmd)
	cmd.Flags().DurationVar(&o.backupEvery, "backup-every", 0, "take a snapshot of the plane at this interval (e.g. 1h), as capstan backup does; 0 takes none")
	cmd.Flags().IntVar(&o.backupKeep, "backup-keep", 24, "with --backup-every, how many snapshots to keep; the oldest are removed")
	cmd.Flags().StringVar(&o.backupDir, "backup-dir", "", "with --backup-every, where the snapshots go (default <state-dir>/backups; keep them off the state dir's disk to survive its loss)")
	cmd.Flags().StringVar(&o.backupKeyFile, "backup-encryption-key-file", "", "with --backup-every, encrypt the snapshots with the 32-byte key in this file")
	cmd.Flags().IntVar(&o.uiPort, "ui-port", console.DefaultPort, "loopback port of the web console the plane serves (capstan ui); 0 turns it off")
	cmd.Flags().IntVar(&o.notifyFD, "notify-fd", 0, "file descriptor to report readiness on (used by the detaching parent)")
	_ = cmd.Flags().MarkHidden("notify-fd")
	return cmd
}

// checkFlags refuses values no plane can start with, before one starts.
func (o *upOptions) checkFlags() error {
	var errs []error
	if o.apiPort < 0 || o.apiPort > 65535 {
		errs = append(errs, fmt.Errorf("--api-port %d: a port is 1 to 65535, or 0 for the one chosen on the first start", o.apiPort))
	}
	if o.uiPort < 0 || o.uiPort > 65535 {
		errs = append(errs, fmt.Errorf("--ui-port %d: a port is 1 to 65535, or 0 to serve no web console", o.uiPort))
	}
	if o.timeout <= 0 {
		errs = append(errs, fmt.Errorf("--timeout %s: must be more than 0, such as 5m", o.timeout))
	}
	if o.cluster != "" && o.clusterTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--cluster-timeout %s: must be more than 0, such as 10m", o.clusterTimeout))
	}
	return errors.Join(errs...)
}

// runForeground runs the plane in this process until SIGINT or SIGTERM.
func runForeground(cmd *cobra.Command, dir mgmt.StateDir, o *upOptions) error {
	var notify *os.File
	if o.notifyFD > 0 {
		notify = os.NewFile(uintptr(o.notifyFD), "notify")
	}
	schedule, err := scheduledBackups(dir, o)
	if err != nil {
		if notify != nil {
			fmt.Fprintf(notify, "error %s\n", strings.ReplaceAll(err.Error(), "\n", " "))
		}
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	startCtx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()

	started := time.Now()
	// The plane records its providers in clusterctl's inventory in the
	// namespace an installed manager would run in. It does so also with
	// --controllers=false: the plane serves these providers' kinds, and the
	// `capstan manager` that runs them then is meant to run the same ones.
	plane, err := mgmt.Start(startCtx, mgmt.Options{StateDir: dir, APIServerPort: o.apiPort, Version: version.Version,
		Inventory: &inventory.Installed{Namespace: deploy.Namespace, Version: version.Version, Local: true}})
	if err != nil {
		if notify != nil {
			fmt.Fprintf(notify, "error %s\n", strings.ReplaceAll(err.Error(), "\n", " "))
		}
		return err
	}
	defer plane.Stop()
	// The controllers start behind the API and reconcile whatever is
	// created meanwhile; but the admission webhooks refuse topology Clusters
	// and ClusterClass changes while nobody serves them (their failure
	// policy is Fail), so the plane is only reported ready once they serve.
	// managerDone stays nil (never ready) when no controllers run here.
	var managerDone chan error
	if o.controllers {
		managerDone = make(chan error, 1)
		webhooksReady := make(chan struct{})
		ctrl.SetLogger(klog.NewKlogr())
		go func() {
			mgr, err := manager.New(plane.Controllers, manager.Options{MetricsAddr: "0", ProbeAddr: "0",
				Local: &local.Options{Dir: o.machinesDir(dir)}, InMemory: o.inMemoryOptions(), ClusterKubeconfigDir: string(dir),
				// QEMU machines run beside local ones; the provider costs
				// nothing until a QEMUMachine exists.
				QEMU:    &qemu.Options{Dir: filepath.Join(string(dir), "qemu"), ImageCacheDir: o.qemuImageCache},
				Webhook: &webhook.Options{BindAddress: "127.0.0.1:0", Namespace: deploy.Namespace, Ready: func() { close(webhooksReady) }}})
			if err != nil {
				managerDone <- fmt.Errorf("starting controllers: %w", err)
				return
			}
			managerDone <- mgr.Start(ctx)
		}()
		select {
		case <-webhooksReady:
		case err := <-managerDone:
			err = fmt.Errorf("the controllers stopped before the admission webhooks served: %v", err)
			if notify != nil {
				fmt.Fprintf(notify, "error %s\n", strings.ReplaceAll(err.Error(), "\n", " "))
			}
			return err
		case <-startCtx.Done():
			err := fmt.Errorf("the admission webhooks did not serve within %s", o.timeout)
			if notify != nil {
				fmt.Fprintf(notify, "error %s\n", err)
			}
			return err
		}
	}
	if schedule != nil {
		schedule.Log = klog.Background().WithName("backup")
		go schedule.Run(ctx)
	}
	if o.uiPort != 0 {
		defer startPlaneConsole(ctx, dir, plane.Admin, o.uiPort)()
	}
	klog.InfoS("Management plane ready", "server", plane.Admin.Host, "stateDir", dir, "seconds", time.Since(started).Seconds())
	if notify != nil {
		fmt.Fprintln(notify, "ready")
		notify.Close()
	} else {
		printReady(cmd.OutOrStdout(), dir, plane.Admin.Host, os.Getpid(), "Press Ctrl-C to stop it.")
		if o.cluster != "" {
			go func() {
				if err := o.createCluster(ctx, cmd.OutOrStdout(), dir); err != nil {
					fmt.Fprintln(cmd.ErrOrStderr(), "Error:", err)
				}
			}()
		}
	}

	select {
	case <-ctx.Done():
		klog.InfoS("Stopping management plane", "stateDir", dir)
		if managerDone != nil {
			// Controllers stop before the API server they talk to.
			select {
			case <-managerDone:
			case <-time.After(30 * time.Second):
			}
		}
		return nil
	case err := <-plane.Done():
		return fmt.Errorf("the API server stopped: %v", err)
	case err := <-managerDone:
		return fmt.Errorf("the controllers stopped: %v", err)
	}
}

// inMemoryOptions are the in-memory provider's options when it runs.
func (o *upOptions) inMemoryOptions() *inmemory.Options {
	if !o.inMemory {
		return nil
	}
	return &inmemory.Options{}
}

// machinesDir is where the local provider keeps its machines.
func (o *upOptions) machinesDir(dir mgmt.StateDir) string {
	if o.localDir != "" {
		return o.localDir
	}
	return dir.LocalDir()
}

// runDetached starts `capstan up --foreground` as a session leader of its
// own, waits until it reports ready (or fails), and returns the shell.
func runDetached(cmd *cobra.Command, dir mgmt.StateDir, o *upOptions) error {
	out := cmd.OutOrStdout()
	if running, pid := dir.Running(); running {
		if ri, err := dir.ReadRunInfo(); err == nil && ri.PID == pid {
			fmt.Fprintf(out, "Capstan is already running (pid %d, since %s).\n", pid, ri.Since.Format(time.RFC3339))
			printReady(out, dir, ri.Server, pid, "")
			if o.cluster != "" {
				fmt.Fprintln(out)
				return o.createCluster(cmd.Context(), out, dir)
			}
			return nil
		}
		return &mgmt.InUseError{Dir: dir, PID: pid}
	}
	if err := dir.Prepare(); err != nil {
		return err
	}
	rotateLog(dir.LogPath())
	logFile, err := os.OpenFile(dir.LogPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("opening log file: %w", err)
	}
	defer logFile.Close()
	fmt.Fprintf(logFile, "==== capstan up %s (pid of parent %d) ====\n", time.Now().Format(time.RFC3339), os.Getpid())

	exe, err := os.Executable()
	if err != nil {
		return err
	}
	readEnd, writeEnd, err := os.Pipe()
	if err != nil {
		return err
	}
	defer readEnd.Close()
	args := []string{"up", "--foreground", "--state-dir", string(dir), "--notify-fd", "3",
		"--controllers=" + strconv.FormatBool(o.controllers), "--in-memory=" + strconv.FormatBool(o.inMemory),
		"--timeout", o.timeout.String(), "-v", klogVerbosity(cmd), "--ui-port", strconv.Itoa(o.uiPort)}
	if o.apiPort != 0 {
		args = append(args, "--api-port", strconv.Itoa(o.apiPort))
	}
	if o.localDir != "" {
		args = append(args, "--local-dir", o.localDir)
	}
	if o.qemuImageCache != "" {
		args = append(args, "--qemu-image-cache", o.qemuImageCache)
	}
	if o.backupEvery != 0 {
		args = append(args, "--backup-every", o.backupEvery.String(), "--backup-keep", strconv.Itoa(o.backupKeep),
			"--backup-dir", o.backupDir, "--backup-encryption-key-file", o.backupKeyFile)
	}
	child := exec.Command(exe, args...)
	child.Stdout, child.Stderr = logFile, logFile
	child.ExtraFiles = []*os.File{writeEnd}
	child.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	started := time.Now()
	if err := child.Start(); err != nil {
		writeEnd.Close()
		return fmt.Errorf("starting the management plane: %w", err)
	}
	writeEnd.Close()

	line, readErr := bufio.NewReader(readEnd).ReadString('\n')
	line = strings.TrimSpace(line)
	switch {
	case line == "ready":
		_ = child.Process.Release()
		ri, err := dir.ReadRunInfo()
		if err != nil {
			return fmt.Errorf("the plane reported ready but its run file is unreadable: %w", err)
		}
		fmt.Fprintf(out, "Capstan management plane is up in %.1fs.\n", time.Since(started).Seconds())
		printReady(out, dir, ri.Server, ri.PID, "Stop it with: capstan down"+stateDirFlag(dir))
		if o.cluster != "" {
			fmt.Fprintln(out)
			return o.createCluster(cmd.Context(), out, dir)
		}
		return nil
	case strings.HasPrefix(line, "error "):
		_ = child.Wait()
		return errors.New(strings.TrimPrefix(line, "error "))
	default:
		waitErr := child.Wait()
		return fmt.Errorf("the management plane exited before it was ready (%v, %v); last lines of %s:\n%s",
			waitErr, readErr, dir.LogPath(), tailFile(dir.LogPath(), 20))
	}
}

func printReady(w io.Writer, dir mgmt.StateDir, server string, pid int, last string) {
	fmt.Fprintf(w, "  API server: %s (pid %d)\n", server, pid)
	fmt.Fprintf(w, "  kubeconfig: %s\n", dir.KubeconfigPath())
	fmt.Fprintf(w, "  logs:       %s\n", dir.LogPath())
	printPlaneConsole(w, dir, pid)
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Use it with:\n  export KUBECONFIG=%s\n  kubectl get clusters,machines -A\n", dir.KubeconfigPath())
	if last != "" {
		fmt.Fprintln(w, last)
	}
}

// stateDirFlag repeats --state-dir in printed hints when it is not the default.
func stateDirFlag(dir mgmt.StateDir) string {
	if string(dir) == mgmt.DefaultStateDir() {
		return ""
	}
	return " --state-dir " + string(dir)
}

// klogVerbosity passes the user's -v on to the detached child.
func klogVerbosity(cmd *cobra.Command) string {
	if f := cmd.Flags().Lookup("v"); f != nil {
		return f.Value.String()
	}
	return "0"
}

// rotateLog keeps one previous log so the file cannot grow without bound.
func rotateLog(path string) {
	if fi, err := os.Stat(path); err == nil && fi.Size() > 20<<20 {
		_ = os.Rename(path, path+".1")
	}
}

func tailFile(path string, lines int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	parts := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(parts) > lines {
		parts = parts[len(parts)-lines:]
	}
	return string(bytes.Join(parts, []byte("\n")))
}

// createCluster creates the --cluster workload cluster through the plane's
// admin kubeconfig.
func (o *upOptions) createCluster(ctx context.Context, out io.Writer, dir mgmt.StateDir) error {
	if ctx == nil {
		ctx = context.Background()
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", dir.KubeconfigPath())
	if err != nil {
		return fmt.Errorf("reading the management plane's kubeconfig: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, o.clusterTimeout)
	defer cancel()
	return createWorkloadCluster(ctx, out, cfg, dir, o.cluster, &o.template)
}
