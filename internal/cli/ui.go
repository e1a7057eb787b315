package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"capstan.dev/capstan/internal/atomicfile"
	"capstan.dev/capstan/internal/console"
	"capstan.dev/capstan/internal/mgmt"
)

func init() { register(newUICommand) }

func newUICommand(g *globals) *cobra.Command {
	target := &mgmtTarget{}
	var port int
	cmd := &cobra.Command{
		Use:   "ui",
		Short: "Serve the web console of the management cluster on a loopback port",
		Long: `Serve the web console of the management cluster on 127.0.0.1: every Cluster at a
glance, each cluster's objects, conditions, Nodes and events, live, and a few
actions (scale, pause, rollout restart, kubeconfig download). Everything is read
and done with the credentials of the kubeconfig, so RBAC decides what you see
and may do. Open the printed URL: its token (in the URL's fragment) signs one browser in,
for 12 hours, and is then replaced; the next URL is printed.`,
		Example: `  capstan ui
  capstan ui --kubeconfig ~/.kube/prod --port 8500`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if port < 0 || port > 65535 {
				return fmt.Errorf("--port %d: a port is 1 to 65535, or 0 for a free one", port)
			}
			cfg, err := target.restConfig(g)
			if err != nil {
				return err
			}
			session := console.Session{Server: cfg.Host}
			if raw, err := clientConfig(target.loadingRules(g)).RawConfig(); err == nil {
				session.Context = raw.CurrentContext
			}
			out := cmd.OutOrStdout()
			var outMu sync.Mutex
			// Each URL signs in once; the terminal gets the next one.
			onURL := func(url string) {
				outMu.Lock()
				defer outMu.Unlock()
				fmt.Fprintf(out, "A browser signed in; the address for the next one:\n  next: %s\n", url)
			}
			srv, err := console.New(console.Options{Config: consoleConfig(cfg), Session: session, Log: klog.Background().WithName("console"), OnURL: onURL})
			if err != nil {
				return err
			}
			ln, err := srv.Listen(port)
			if err != nil {
				return fmt.Errorf("--port %d: %w: choose another port, or 0 for a free one", port, err)
			}
			outMu.Lock()
			fmt.Fprintf(out, "Capstan console of %s (each address signs one browser in, for %s):\n  %s\nPress Ctrl-C to stop it.\n", cfg.Host, console.DefaultSessionLifetime, srv.URL())
			outMu.Unlock()
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return srv.Run(ctx, ln)
		},
	}
	cmd.Flags().StringVar(&target.kubeconfig, "kubeconfig", "", "kubeconfig of the management cluster (default: $KUBECONFIG, else the running capstan plane's)")
	cmd.Flags().IntVar(&port, "port", 0, "loopback port to serve on (0: a free one)")
	return cmd
}

// consoleConfig is cfg with a rate limit that suits a console following a
// thousand clusters: the client-go default of 5 requests a second would
// make its first views crawl.
func consoleConfig(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 50, 100
	return cfg
}

// planeConsole is what the plane process records about the console it
// serves, for `capstan up` and `capstan status` to print. The file is
// private to the state directory's owner: the URL holds the access token.
type planeConsole struct {
	PID     int    `json:"pid"`
	URL     string `json:"url,omitempty"`
	Problem string `json:"problem,omitempty"`
}

func planeConsolePath(dir mgmt.StateDir) string { return filepath.Join(string(dir), "console.json") }

// startPlaneConsole serves the console of the plane with its admin
// credentials on port until ctx ends. A busy port is noted and the plane
// goes on without a console; the returned func removes the record.
func startPlaneConsole(ctx context.Context, dir mgmt.StateDir, admin *rest.Config, port int) func() {
	record := planeConsole{PID: os.Getpid()}
	var recordMu sync.Mutex
	write := func() {
		data, _ := json.Marshal(record)
		if werr := atomicfile.WriteFile(planeConsolePath(dir), data, 0o600); werr != nil {
			klog.ErrorS(werr, "Cannot record the web console's address")
		}
	}
	// Each URL signs in once: capstan status shows the next one.
	onURL := func(url string) {
		recordMu.Lock()
		defer recordMu.Unlock()
		record.URL = url
		write()
	}
	session := console.Session{Server: admin.Host}
	if raw, err := clientcmd.LoadFromFile(dir.KubeconfigPath()); err == nil {
		session.Context = raw.CurrentContext
	}
	srv, err := console.New(console.Options{Config: consoleConfig(admin), Session: session, Log: klog.Background().WithName("console"), StartOnFirstUse: true, OnURL: onURL})
	if err == nil {
		var ln net.Listener
		if ln, err = srv.Listen(port); err != nil {
			err = fmt.Errorf("port %d: %w (choose another with --ui-port, or 0 to turn it off)", port, err)
		} else {
			recordMu.Lock()
			record.URL = srv.URL()
			recordMu.Unlock()
			go func() {
				if err := srv.Run(ctx, ln); err != nil {
					klog.ErrorS(err, "The web console stopped")
				}
			}()
		}
	}
	if err != nil {
		record.Problem = "the web console is off: " + err.Error()
		klog.InfoS("Web console not started", "port", port, "error", err.Error())
	}
	recordMu.Lock()
	write()
	recordMu.Unlock()
	return func() { _ = os.Remove(planeConsolePath(dir)) }
}

// readPlaneConsole is the console record of the plane running as pid.
func readPlaneConsole(dir mgmt.StateDir, pid int) (*planeConsole, error) {
	data, err := os.ReadFile(planeConsolePath(dir))
	if err != nil {
		return nil, err
	}
	var record planeConsole
	if err := json.Unmarshal(data, &record); err != nil {
		return nil, err
	}
	if record.PID != pid {
		return nil, errors.New("the console record is of another run")
	}
	return &record, nil
}

// printPlaneConsole prints the console line of the plane running as pid.
func printPlaneConsole(w io.Writer, dir mgmt.StateDir, pid int) {
	record, err := readPlaneConsole(dir, pid)
	switch {
	case err != nil:
	case record.URL != "":
		fmt.Fprintf(w, "  console:    %s\n", record.URL)
	case record.Problem != "":
		fmt.Fprintf(w, "  console:    %s\n", record.Problem)
	}
}
