package local

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
)

// File names in a machine directory (docs/local-provider.md).
const (
	machineFile   = "machine.json"
	bootstrapFile = "bootstrap-data"
	nodeLockFile  = "node.lock"
	nodeLogFile   = "node.log"
	statusFile    = "status.json"
)

// layout names the directories of one cluster under the provider's root.
type layout struct{ root string }

func (l layout) cluster(namespace, cluster string) string {
	return filepath.Join(l.root, namespace, cluster)
}

func (l layout) lb(namespace, cluster string) string {
	return filepath.Join(l.cluster(namespace, cluster), "lb")
}

func (l layout) machines(namespace, cluster string) string {
	return filepath.Join(l.cluster(namespace, cluster), "machines")
}

func (l layout) machine(namespace, cluster, name string) string {
	return filepath.Join(l.machines(namespace, cluster), name)
}

// MachineConfig is machine.json: what the manager tells a machine about
// itself before its first start.
type MachineConfig struct {
	Namespace     string `json:"namespace"`
	Cluster       string `json:"cluster"`
	Machine       string `json:"machine"`
	Hostname      string `json:"hostname"`
	ProviderID    string `json:"providerID"`
	Version       string `json:"version"`
	ControlPlane  bool   `json:"controlPlane"`
	FailureDomain string `json:"failureDomain,omitempty"`
}

// NodeStatus is status.json: what a machine's process says of itself.
type NodeStatus struct {
	PID           int             `json:"pid"`
	Phase         string          `json:"phase"`
	Message       string          `json:"message,omitempty"`
	Since         string          `json:"since,omitempty"`
	NodeName      string          `json:"nodeName,omitempty"`
	APIServerPort int             `json:"apiServerPort,omitempty"`
	EtcdClientURL string          `json:"etcdClientURL,omitempty"`
	Bootstrap     BootstrapStatus `json:"bootstrap"`
}

// BootstrapStatus is how far a machine got with its bootstrap data.
type BootstrapStatus struct {
	Complete bool     `json:"complete"`
	Skipped  []string `json:"skipped,omitempty"`
	Failed   string   `json:"failed,omitempty"`
}

// readNodeStatus reads dir/status.json; a missing file is no status (nil).
func readNodeStatus(dir string) (*NodeStatus, error) {
	raw, err := os.ReadFile(filepath.Join(dir, statusFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	s := &NodeStatus{}
	if err := json.Unmarshal(raw, s); err != nil {
		return nil, err
	}
	return s, nil
}

// writeIfChanged writes data to path atomically (temp file and rename) with
// the given mode, unless the file already holds exactly data.
func writeIfChanged(path string, data []byte, mode os.FileMode) error {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
		if fi, err := os.Stat(path); err == nil && fi.Mode().Perm() == mode {
			return nil
		}
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
