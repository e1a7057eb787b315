package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"capstan.dev/capstan/internal/certs"
)

// File names in a machine directory (docs/local-provider.md).
const (
	MachineFile           = "machine.json"
	BootstrapDataFile     = "bootstrap-data"
	LockFile              = "node.lock"
	StatusFile            = "status.json"
	APIServerEndpointFile = "apiserver-endpoint"
	RootFS                = "rootfs"

	// stateFile, inside the machine, records what the node became.
	stateFile = "/var/lib/capstan/node.json"
	// configCopy, inside the machine, keeps the kubeadm configuration the
	// node was set up with, so a restart does not depend on /run.
	configCopy = "/var/lib/capstan/kubeadm.yaml"
)

// Machine is machine.json, written by the manager before the first start.
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

func readMachine(dir string) (Machine, error) {
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

// Phases of status.json.
const (
	PhaseBooting = "Booting"
	PhaseRunning = "Running"
	PhaseFailed  = "Failed"
)

// Status is status.json, the node's report to the manager.
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

// BootstrapStatus is how far the bootstrap data was applied.
type BootstrapStatus struct {
	Complete bool     `json:"complete"`
	Skipped  []string `json:"skipped,omitempty"`
	Failed   string   `json:"failed,omitempty"`
}

func writeStatus(dir string, s Status) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return certs.WriteFileAtomic(filepath.Join(dir, StatusFile), append(b, '\n'), 0o644)
}

// lock is the machine's flock, held for the life of the process.
type lock struct{ f *os.File }

// ErrLocked is returned when another process runs the machine.
var ErrLocked = errors.New("machine is already running")

func takeLock(dir string) (*lock, error) {
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening the machine lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s is held by another `capstan node run` for %s; stop that process first", ErrLocked, path, dir)
		}
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	// The pid is informative only: the lock itself is the truth.
	_ = f.Truncate(0)
	_, _ = fmt.Fprintf(f, "%d\n", os.Getpid())
	return &lock{f: f}, nil
}

func (l *lock) release() {
	_ = syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	_ = l.f.Close()
}

// Roles a machine takes on.
const (
	RoleControlPlane = "control-plane"
	RoleWorker       = "worker"
)

// Ports are the loopback ports of a control-plane machine, chosen once:
// etcd keeps its peer URL in the cluster, so a restart must reuse them.
type Ports struct {
	APIServer  int `json:"apiServer"`
	EtcdClient int `json:"etcdClient"`
	EtcdPeer   int `json:"etcdPeer"`
}

// state is rootfs/var/lib/capstan/node.json.
type state struct {
	Role     string `json:"role,omitempty"`
	NodeName string `json:"nodeName,omitempty"`
	// Joined is true for a machine that joined an existing cluster.
	Joined bool   `json:"joined,omitempty"`
	Ports  *Ports `json:"ports,omitempty"`
	// EtcdInitialCluster is what AddEtcdMember answered for a control-plane
	// join; kept so a restart neither adds the member twice nor loses it.
	EtcdInitialCluster string `json:"etcdInitialCluster,omitempty"`
	// Server is the API endpoint a worker's kubelet talks to.
	Server string `json:"server,omitempty"`
	// Started is true once the components came up the first time.
	Started bool `json:"started,omitempty"`
}

func loadState(root string) (*state, error) {
	b, err := os.ReadFile(filepath.Join(root, stateFile))
	if errors.Is(err, os.ErrNotExist) {
		return &state{}, nil
	}
	if err != nil {
		return nil, err
	}
	var s state
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%s: %w (the node's saved state is damaged; remove the machine and create it again)", filepath.Join(root, stateFile), err)
	}
	return &s, nil
}

func (s *state) save(root string) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return certs.WriteFileAtomic(filepath.Join(root, stateFile), append(b, '\n'), 0o644)
}

// freePorts picks n distinct free loopback ports, holding each listener
// until all are chosen so the same port is not handed out twice.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("choosing a loopback port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// hostPath resolves a path inside the machine to the host, refusing paths
// that are relative or climb out of the root.
func hostPath(root, p string) (string, error) {
	if !strings.HasPrefix(p, "/") {
		return "", fmt.Errorf("path %q is relative; a local machine only resolves absolute paths", p)
	}
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return "", fmt.Errorf("path %q contains ..", p)
		}
	}
	return filepath.Join(root, filepath.Clean(p)), nil
}
