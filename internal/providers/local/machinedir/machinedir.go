package machinedir

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"capstan.dev/capstan/internal/atomicfile"
	"capstan.dev/capstan/internal/lockfile"
)

// File names in a machine directory (<root>/<ns>/<cluster>/machines/<name>).
const (
	// MachineFile is machine.json, written by the manager (Machine).
	MachineFile = "machine.json"
	// BootstrapDataFile is the bootstrap Secret's value, as written.
	BootstrapDataFile = "bootstrap-data"
	// LockFile is held (flock) by the machine's process while it runs.
	LockFile = "node.lock"
	// LogFile is the machine process's stdout and stderr.
	LogFile = "node.log"
	// StatusFile is status.json, written by the machine (Status).
	StatusFile = "status.json"
	// APIServerEndpointFile holds host:port of the machine's kube-apiserver
	// while it is ready and not leaving; the load balancer forwards there.
	APIServerEndpointFile = "apiserver-endpoint"
	// RootFS is the machine's "/".
	RootFS = "rootfs"
)

// File names in a load balancer's directory (<root>/<ns>/<cluster>/lb).
const (
	// LBConfigFile is lb.json, written by the manager (LBConfig).
	LBConfigFile = "lb.json"
	// LBLockFile is held (flock) by the load balancer while it runs.
	LBLockFile = "lb.lock"
	// LBLogFile is the load balancer's stdout and stderr.
	LBLogFile = "lb.log"
)

// Machine is machine.json: what the manager tells a machine about itself
// before its first start.
type Machine struct {
	Namespace     string `json:"namespace"`
	Cluster       string `json:"cluster"`
	Machine       string `json:"machine"`
	Hostname      string `json:"hostname"`
	ProviderID    string `json:"providerID"`
	Version       string `json:"version"`
	ControlPlane  bool   `json:"controlPlane"`
	FailureDomain string `json:"failureDomain,omitempty"`
}

// ReadMachine reads dir/machine.json and checks that it names the machine.
func ReadMachine(dir string) (Machine, error) {
	path := filepath.Join(dir, MachineFile)
	b, err := os.ReadFile(path)
	if err != nil {
		return Machine{}, fmt.Errorf("reading the machine description: %w (the local provider writes %s before starting the machine)", err, MachineFile)
	}
	var m Machine
	if err := json.Unmarshal(b, &m); err != nil {
		return Machine{}, fmt.Errorf("%s: %w", path, err)
	}
	if m.Hostname == "" {
		return Machine{}, fmt.Errorf("%s: hostname is required", path)
	}
	if m.ProviderID == "" {
		return Machine{}, fmt.Errorf("%s: providerID is required", path)
	}
	return m, nil
}

// ProviderDir is the local provider's directory that holds the machine
// directory dir, <provider dir>/<namespace>/<cluster>/machines/<name>, as
// machine.json's namespace and cluster say.
func ProviderDir(dir string, m Machine) (string, error) {
	machines := filepath.Dir(filepath.Clean(dir))
	cluster := filepath.Dir(machines)
	ns := filepath.Dir(cluster)
	if filepath.Base(machines) != "machines" || filepath.Base(cluster) != m.Cluster || filepath.Base(ns) != m.Namespace {
		return "", fmt.Errorf("machine directory %s is not <local dir>/%s/%s/machines/<name> as %s says: move it there or fix %s",
			dir, m.Namespace, m.Cluster, MachineFile, MachineFile)
	}
	return filepath.Dir(ns), nil
}

// WriteMachine writes dir/machine.json and dir/bootstrap-data (0600: it holds
// the cluster's keys), creating dir (0700: what the machine keeps under it,
// kubeconfigs and keys among it, is its owner's alone). Files that already hold the content are
// left alone, since the manager writes them on every reconcile and the
// machine's process may be reading them.
func WriteMachine(dir string, m Machine, bootstrapData []byte) error {
	if err := PrivateDir(dir); err != nil {
		return err
	}
	raw, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFileIfChanged(filepath.Join(dir, MachineFile), append(raw, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", MachineFile, err)
	}
	if err := atomicfile.WriteFileIfChanged(filepath.Join(dir, BootstrapDataFile), bootstrapData, 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", BootstrapDataFile, err)
	}
	return nil
}

// PrivateDir creates dir, and any missing parent, for its owner alone
// (0700), and takes group and other access away from a dir that exists
// already: directories made by older versions were 0755.
func PrivateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if fi.Mode().Perm() != 0o700 {
		return os.Chmod(dir, 0o700)
	}
	return nil
}

// Phases of status.json.
const (
	PhaseBooting = "Booting"
	PhaseRunning = "Running"
	PhaseFailed  = "Failed"
)

// Status is status.json, the machine's report to the manager.
type Status struct {
	PID           int              `json:"pid"`
	Phase         string           `json:"phase"`
	Message       string           `json:"message,omitempty"`
	Since         time.Time        `json:"since"`
	NodeName      string           `json:"nodeName,omitempty"`
	APIServerPort int              `json:"apiServerPort,omitempty"`
	EtcdClientURL string           `json:"etcdClientURL,omitempty"`
	Bootstrap     *BootstrapStatus `json:"bootstrap,omitempty"`
}

// BootstrapStatus is how far the machine got with its bootstrap data.
type BootstrapStatus struct {
	Complete bool     `json:"complete"`
	Skipped  []string `json:"skipped,omitempty"`
	Failed   string   `json:"failed,omitempty"`
}

// ReadStatus reads dir/status.json; a missing file is no status (nil).
func ReadStatus(dir string) (*Status, error) {
	raw, err := os.ReadFile(filepath.Join(dir, StatusFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	s := &Status{}
	if err := json.Unmarshal(raw, s); err != nil {
		return nil, err
	}
	return s, nil
}

// WriteStatus replaces dir/status.json; the manager watches the file and
// reads it whenever it changes.
func WriteStatus(dir string, s Status) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(dir, StatusFile), append(b, '\n'), 0o644)
}

// LockMachine takes dir/node.lock for as long as this process runs the
// machine (release it, or exit). It fails with lockfile.ErrHeld when another
// process runs the machine.
func LockMachine(dir string) (*lockfile.Lock, error) {
	return lockfile.Acquire(filepath.Join(dir, LockFile), 0o644)
}

// LBConfig is lb.json: what the manager tells the cluster's load balancer.
type LBConfig struct {
	// Port is the loopback port to listen on.
	Port int32 `json:"port"`
	// MachinesDir holds one directory per machine of the cluster.
	MachinesDir string `json:"machinesDir"`
	// CheckIntervalMillis and CheckTimeoutMillis pace the backends'
	// health checks; zero means the balancer's defaults. An emulated API
	// server answers slowly: checking it often only adds to its load.
	CheckIntervalMillis int32 `json:"checkIntervalMillis,omitempty"`
	CheckTimeoutMillis  int32 `json:"checkTimeoutMillis,omitempty"`
	// SwitchSocket, when set, is the unix datagram socket of the
	// cluster's Ethernet segment (package vswitch), which the load
	// balancer's process serves beside the proxy.
	SwitchSocket string `json:"switchSocket,omitempty"`
}

// ReadLBConfig reads dir/lb.json and checks it.
func ReadLBConfig(dir string) (LBConfig, error) {
	var c LBConfig
	path := filepath.Join(dir, LBConfigFile)
	raw, err := os.ReadFile(path)
	if err != nil {
		return c, err
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return c, fmt.Errorf("%s: %w", path, err)
	}
	if c.Port < 1 || c.Port > 65535 {
		return c, fmt.Errorf("%s: port %d is not a TCP port: the manager writes it from the LocalCluster's spec.controlPlaneEndpoint.port", path, c.Port)
	}
	if c.MachinesDir == "" {
		return c, fmt.Errorf("%s: machinesDir is empty", path)
	}
	for name, v := range map[string]int32{"checkIntervalMillis": c.CheckIntervalMillis, "checkTimeoutMillis": c.CheckTimeoutMillis} {
		if v < 0 || v > 600000 {
			return c, fmt.Errorf("%s: %s %d is outside 0-600000 (0 means the default)", path, name, v)
		}
	}
	return c, nil
}

// WriteLBConfig replaces dir/lb.json.
func WriteLBConfig(dir string, c LBConfig) error {
	raw, err := json.Marshal(c)
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(dir, LBConfigFile), raw, 0o644)
}

// LockLB takes dir/lb.lock for as long as this process is the cluster's load
// balancer. It fails with lockfile.ErrHeld when another process is.
func LockLB(dir string) (*lockfile.Lock, error) {
	return lockfile.Acquire(filepath.Join(dir, LBLockFile), 0o644)
}
