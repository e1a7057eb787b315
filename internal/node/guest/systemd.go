package guest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"capstan.dev/capstan/internal/atomicfile"
)

// UnitName is the systemd service that runs the node's components.
const UnitName = "capstan-node.service"

// Binary is where the guest image puts the Capstan binary.
const Binary = "/opt/capstan/capstan"

// unitPath is where InstallUnit writes the unit, inside the root.
const unitPath = "/etc/systemd/system/" + UnitName

// unit is capstan-node.service. It starts after the network (the kubelet
// and etcd need the guest's address), restarts whatever ends it, and is
// wanted by multi-user.target so every boot starts the node again.
var unit = `[Unit]
Description=Capstan node: the Kubernetes components kubeadm set up on this machine
Wants=network-online.target
After=network-online.target

[Service]
ExecStart=` + Binary + ` node serve --root /
Restart=always
RestartSec=5
KillSignal=SIGTERM
TimeoutStopSec=60

[Install]
WantedBy=multi-user.target
`

// InstallUnit writes capstan-node.service under root.
func InstallUnit(root string) error {
	p := filepath.Join(root, unitPath)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	if err := atomicfile.WriteFile(p, []byte(unit), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", unitPath, err)
	}
	return nil
}

// Systemd starts the unit with systemctl, enabled so it starts at boot.
type Systemd struct {
	// Systemctl is the program to run (default "systemctl" on PATH).
	Systemctl string
}

// systemctlCalls are the systemctl invocations that enable and start the
// unit once its file is written: systemd reads unit files only when told.
func systemctlCalls() [][]string {
	return [][]string{
		{"daemon-reload"},
		{"enable", "--now", UnitName},
	}
}

// Start implements Service.
func (s Systemd) Start(ctx context.Context) error {
	prog := s.Systemctl
	if prog == "" {
		prog = "systemctl"
	}
	for _, args := range systemctlCalls() {
		out, err := exec.CommandContext(ctx, prog, args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("systemctl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}
