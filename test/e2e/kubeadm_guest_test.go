package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"capstan.dev/capstan/internal/providers/local/machinedir"
	"capstan.dev/capstan/test/fixture"
)

// TestKubeadmCommandOnARoot runs the binary's `capstan kubeadm init` as a
// QEMU guest's cloud-init does, on a directory standing for the guest's
// "/": it must return 0 only with the node running under its service
// (here `capstan node serve --root`, started in the background), and fail
// with a message otherwise.
func TestKubeadmCommandOnARoot(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	pki := newClusterPKI(t)
	api, etcdClient, etcdPeer := fixture.FreePort(t), fixture.FreePort(t), fixture.FreePort(t)
	lb := fixture.NewProxy(t, fmt.Sprintf("127.0.0.1:%d", api))

	// What cloud-init writes from the bootstrap data.
	for _, f := range append(pki.writeFiles(t), map[string]any{"path": "/run/kubeadm/kubeadm.yaml", "content": fmt.Sprintf(initConfig, lb.Addr())}) {
		p := filepath.Join(root, f["path"].(string))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(strings.ReplaceAll(f["content"].(string), "{{ ds.meta_data.local_hostname }}", "cp-0")), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { stopServe(t, root) })

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	out, err := exec.CommandContext(ctx, env.Binary, "kubeadm", "init", "--config", "/run/kubeadm/kubeadm.yaml", "--v=1",
		"--skip-phases=addon/kube-proxy", "--ignore-preflight-errors=all", "--root", root,
		"--apiserver-port", fmt.Sprint(api), "--etcd-client-port", fmt.Sprint(etcdClient), "--etcd-peer-port", fmt.Sprint(etcdPeer)).CombinedOutput()
	if err != nil {
		t.Fatalf("capstan kubeadm init: %v\n%s", err, tail(string(out), 60))
	}
	t.Logf("kubeadm init returned after %s", time.Since(start).Round(time.Second))
	// It returned with the node up under the service, not under itself.
	s, err := machinedir.ReadStatus(filepath.Join(root, "var/lib/capstan"))
	if err != nil || s == nil || s.Phase != machinedir.PhaseRunning {
		t.Fatalf("service status after kubeadm init: %+v, %v", s, err)
	}
	admin := pki.admin(t, lb.Addr())
	node := waitNodeReady(t, admin, "cp-0", time.Minute, func() string { return serveLog(root) })
	if node.Status.NodeInfo.KubeletVersion != "v1.34.2" {
		t.Errorf("kubelet version %q, want the ClusterConfiguration's v1.34.2", node.Status.NodeInfo.KubeletVersion)
	}
	if _, err := os.Stat(filepath.Join(root, "etc/systemd/system/capstan-node.service")); err != nil {
		t.Errorf("the unit a guest's systemd would run: %v", err)
	}

	// A failed kubeadm exits non-zero, saying why.
	out, err = exec.CommandContext(ctx, env.Binary, "kubeadm", "join", "--config", "/run/kubeadm/kubeadm-join-config.yaml", "--root", t.TempDir()).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "kubeadm-join-config.yaml") {
		t.Errorf("kubeadm join without its configuration: %v\n%s", err, tail(string(out), 60))
	}
}

// stopServe ends the background `capstan node serve` of root, as systemd
// would at shutdown, and waits for it to exit.
func stopServe(t *testing.T, root string) {
	s, err := machinedir.ReadStatus(filepath.Join(root, "var/lib/capstan"))
	if err != nil || s == nil || s.PID == 0 {
		return
	}
	_ = syscall.Kill(s.PID, syscall.SIGTERM)
	deadline := time.Now().Add(60 * time.Second)
	for syscall.Kill(s.PID, 0) == nil {
		if time.Now().After(deadline) {
			_ = syscall.Kill(s.PID, syscall.SIGKILL)
			t.Errorf("capstan node serve (pid %d) did not stop within 60s of SIGTERM", s.PID)
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func serveLog(root string) string {
	b, _ := os.ReadFile(filepath.Join(root, "var/log/capstan-node.log"))
	return tail(string(b), 60)
}
