package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	"capstan.dev/capstan/internal/atomicfile"
	"capstan.dev/capstan/internal/lockfile"
	"capstan.dev/capstan/internal/providers/local/machinedir"
)

// Paths inside the machine (under machinedir.RootFS); the machine directory
// itself is package machinedir's.
const (
	// stateFile records what the node became.
	stateFile = "/var/lib/capstan/node.json"
	// configCopy keeps the kubeadm configuration the node was set up with,
	// so a restart does not depend on /run.
	configCopy = "/var/lib/capstan/kubeadm.yaml"
)

// ErrLocked is returned when another process runs the machine.
var ErrLocked = errors.New("machine is already running")

// takeLock takes the machine's lock for the life of the process, saying in
// the error which process to stop when another one runs the machine.
func takeLock(dir string) (*lockfile.Lock, error) {
	lk, err := machinedir.LockMachine(dir)
	if errors.Is(err, lockfile.ErrHeld) {
		return nil, fmt.Errorf("%w: %s is held by another `capstan node run` for %s; stop that process first", ErrLocked, filepath.Join(dir, machinedir.LockFile), dir)
	}
	if err != nil {
		return nil, fmt.Errorf("taking the machine lock: %w", err)
	}
	return lk, nil
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
	// Version is the cluster's Kubernetes version from its kubeadm
	// configuration, which the kubelet reports when the machine's identity
	// carries none.
	Version string `json:"version,omitempty"`
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
	return atomicfile.WriteFile(filepath.Join(root, stateFile), append(b, '\n'), 0o644)
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
