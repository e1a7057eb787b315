package cloudinit_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"capstan.dev/capstan/internal/node/cloudinit"
)

// A machine boots from its bootstrap data: parse, plan under the machine's
// own directory, and apply with a runner that knows which commands it can
// perform.
func Example() {
	bootstrap := []byte(`## template: jinja
#cloud-config
write_files:
- path: /run/kubeadm/kubeadm.yaml
  owner: root:root
  permissions: '0640'
  content: |
    kind: InitConfiguration
    nodeRegistration:
      name: '{{ ds.meta_data.hostname }}'
runcmd:
- [swapoff, -a]
- kubeadm init --config /run/kubeadm/kubeadm.yaml && echo success > /run/cluster-api/bootstrap-success.complete
package_upgrade: true
`)
	root, err := os.MkdirTemp("", "machine-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(root)

	cfg, err := cloudinit.Parse(bootstrap)
	if err != nil {
		panic(err)
	}
	steps, err := cloudinit.Plan(cfg, cloudinit.Options{Root: root, Hostname: "demo-cp-0"})
	if err != nil {
		panic(err)
	}
	runner := cloudinit.RunnerFunc(func(ctx context.Context, cmd cloudinit.RunCommand) error {
		if strings.HasPrefix(cmd.Command().String(), "kubeadm init") {
			return nil // the node agent performs kubeadm init itself
		}
		return cloudinit.NotSupported("a local machine has no swap")
	})
	report, err := cloudinit.Apply(context.Background(), steps, runner)
	if err != nil {
		panic(err)
	}
	fmt.Print(report)
	written, _ := os.ReadFile(filepath.Join(root, "run/kubeadm/kubeadm.yaml"))
	fmt.Print(string(written))
	fmt.Println("complete:", report.Complete)
	// Output:
	// done         write_files[0]         write /run/kubeadm/kubeadm.yaml (62 bytes, mode 0640)
	// skipped      runcmd[0]              run swapoff -a (not supported on this machine: a local machine has no swap)
	// done         runcmd[1]              run kubeadm init --config /run/kubeadm/kubeadm.yaml && echo success > /run/cluster-api/bootstrap-success.complete
	// skipped      package_upgrade        cloud-config key package_upgrade: not interpreted by Capstan's cloud-init; ignored
	// done         bootstrap-success      write the bootstrap success sentinel /run/cluster-api/bootstrap-success.complete
	// bootstrap complete
	// kind: InitConfiguration
	// nodeRegistration:
	//   name: 'demo-cp-0'
	// complete: true
}
