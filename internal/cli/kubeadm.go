package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	"capstan.dev/capstan/internal/node/agent"
	"capstan.dev/capstan/internal/node/guest"
)

// newKubeadmCommand is what a QEMU guest's /usr/local/bin/kubeadm runs:
// kubeadm init and join as the bootstrap data's runcmd calls them, done by
// Capstan on the guest's own root (docs/qemu-guest.md).
func newKubeadmCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:    "kubeadm",
		Short:  "kubeadm init and join inside a QEMU provider guest (run by the guest's kubeadm shim)",
		Hidden: true,
		// Without this, an unknown kubeadm command would print help and
		// exit 0, which cloud-init would take for success.
		Args: cobra.ArbitraryArgs,
		RunE: func(_ *cobra.Command, args []string) error {
			return fmt.Errorf("kubeadm %s is not supported here: only kubeadm init and kubeadm join run in a Capstan guest", strings.Join(args, " "))
		},
	}
	cmd.AddCommand(newKubeadmVerb("init", guest.Init), newKubeadmVerb("join", guest.Join))
	return cmd
}

func newKubeadmVerb(verb string, run func(context.Context, guest.Options) error) *cobra.Command {
	var o guest.Options
	var apiServerPort, etcdClientPort, etcdPeerPort int
	var ignoredStrings []string
	var ignoredBools []bool
	cmd := &cobra.Command{
		Use:   verb + " --config FILE",
		Short: "kubeadm " + verb + " on this machine; the components then run under " + guest.UnitName,
		Long: `Set this machine up as kubeadm ` + verb + ` would, from the kubeadm configuration
in --config, then start ` + guest.UnitName + ` (installed and enabled) to run
its components, now and at every boot. Returns once the service runs them.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Config == "" {
				return errors.New("--config is required: the kubeadm configuration file (the bootstrap data writes /run/kubeadm/kubeadm.yaml or kubeadm-join-config.yaml)")
			}
			if apiServerPort != 0 || etcdClientPort != 0 || etcdPeerPort != 0 {
				if apiServerPort == 0 || etcdClientPort == 0 || etcdPeerPort == 0 {
					return errors.New("--apiserver-port, --etcd-client-port and --etcd-peer-port go together")
				}
				o.Ports = &agent.Ports{APIServer: apiServerPort, EtcdClient: etcdClientPort, EtcdPeer: etcdPeerPort}
			}
			o.Service = guest.Systemd{}
			if o.Root != "/" {
				// A test root on a host: systemd's unit would run the host's
				// "/", so the service is this binary started in the background.
				o.Service = detachedServe{root: o.Root}
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			o.Log = klog.NewKlogr()
			ctrl.SetLogger(o.Log)
			err := run(ctx, o)
			klog.Flush()
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Config, "config", "", "the kubeadm configuration file")
	// Flags for trying it on a host: a directory standing for "/" (its
	// service is then a background process, not systemd's) and ports of
	// its own.
	f.StringVar(&o.Root, "root", "/", "the machine's root directory")
	f.IntVar(&apiServerPort, "apiserver-port", 0, "the API server's port (default: the configuration's bindPort, 6443)")
	f.IntVar(&etcdClientPort, "etcd-client-port", 0, "etcd's client port (default 2379)")
	f.IntVar(&etcdPeerPort, "etcd-peer-port", 0, "etcd's peer port (default 2380)")
	f.DurationVar(&o.Ready, "ready-timeout", 5*time.Minute, "how long to wait for the service to run the node's components")
	for _, name := range []string{"root", "apiserver-port", "etcd-client-port", "etcd-peer-port", "ready-timeout"} {
		_ = f.MarkHidden(name)
	}
	// kubeadm flags the bootstrap data may pass that change nothing here:
	// there are no preflight checks or phases to skip, and control-plane
	// certificates arrive in the bootstrap data rather than by upload.
	ignoredStrings = make([]string, 2)
	f.StringVar(&ignoredStrings[0], "ignore-preflight-errors", "", "accepted for kubeadm compatibility; ignored")
	f.StringVar(&ignoredStrings[1], "skip-phases", "", "accepted for kubeadm compatibility; ignored")
	ignoredBools = make([]bool, 3)
	f.BoolVar(&ignoredBools[0], "upload-certs", false, "accepted for kubeadm compatibility; ignored")
	f.BoolVar(&ignoredBools[1], "skip-token-print", false, "accepted for kubeadm compatibility; ignored")
	f.BoolVar(&ignoredBools[2], "skip-certificate-key-print", false, "accepted for kubeadm compatibility; ignored")
	return cmd
}

// detachedServe starts `capstan node serve --root ROOT` as a detached
// process of this binary, logging to ROOT/var/log/capstan-node.log: what
// systemd does in a guest, for a root directory on a host.
type detachedServe struct{ root string }

func (d detachedServe) Start(context.Context) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	logPath := filepath.Join(d.root, "var", "log", "capstan-node.log")
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return err
	}
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	child := exec.Command(self, "node", "serve", "--root", d.root)
	child.Stdout, child.Stderr = log, log
	child.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := child.Start(); err != nil {
		return fmt.Errorf("starting capstan node serve: %w", err)
	}
	return child.Process.Release()
}
