package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"capstan.dev/capstan/internal/certs"
	"capstan.dev/capstan/test/fixture"
)

// clusterPKI is what a bootstrap provider generates for a new cluster.
type clusterPKI struct {
	ca, etcd, proxy *certs.KeyPair
	saKey, saPub    []byte
}

func newClusterPKI(t *testing.T) *clusterPKI {
	t.Helper()
	now := time.Now()
	p := &clusterPKI{}
	var err error
	for _, x := range []struct {
		kp **certs.KeyPair
		cn string
	}{{&p.ca, "kubernetes"}, {&p.etcd, "etcd-ca"}, {&p.proxy, "front-proxy-ca"}} {
		if *x.kp, err = certs.NewCA(x.cn, certs.DefaultKeyAlgorithm, now, 24*time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	if p.saKey, p.saPub, err = certs.NewServiceAccountKey(certs.DefaultKeyAlgorithm); err != nil {
		t.Fatal(err)
	}
	return p
}

// writeFiles renders cloud-config write_files entries for the cluster
// certificates, as the kubeadm bootstrap provider does for control planes.
func (p *clusterPKI) writeFiles(t *testing.T) []map[string]any {
	t.Helper()
	var files []map[string]any
	add := func(path, perm string, content []byte) {
		files = append(files, map[string]any{"path": path, "owner": "root:root", "permissions": perm, "content": string(content)})
	}
	for _, x := range []struct {
		name string
		kp   *certs.KeyPair
	}{{"ca", p.ca}, {"etcd/ca", p.etcd}, {"front-proxy-ca", p.proxy}} {
		key, err := x.kp.KeyPEM()
		if err != nil {
			t.Fatal(err)
		}
		add("/etc/kubernetes/pki/"+x.name+".crt", "0640", x.kp.CertPEM())
		add("/etc/kubernetes/pki/"+x.name+".key", "0600", key)
	}
	add("/etc/kubernetes/pki/sa.pub", "0640", p.saPub)
	add("/etc/kubernetes/pki/sa.key", "0600", p.saKey)
	return files
}

// admin is a cluster-admin client for a workload cluster's API server.
func (p *clusterPKI) admin(t *testing.T, endpoint string) kubernetes.Interface {
	t.Helper()
	kp, err := p.ca.Issue(certs.Request{CommonName: "e2e-admin", Organization: []string{"system:masters"}, Client: true}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	key, err := kp.KeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: "https://" + endpoint, TLSClientConfig: rest.TLSClientConfig{
		CAData: p.ca.CertPEM(), CertData: kp.CertPEM(), KeyData: key}})
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// cloudConfig renders bootstrap data in the shape of Cluster API's kubeadm
// bootstrap provider.
func cloudConfig(t *testing.T, files []map[string]any, runcmd []string) []byte {
	t.Helper()
	b, err := yaml.Marshal(map[string]any{"write_files": files, "runcmd": runcmd})
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte("## template: jinja\n#cloud-config\n"), b...)
}

// machine is one `capstan node run` process and its directory.
type machine struct {
	t    *testing.T
	name string
	dir  string
	cmd  *exec.Cmd
	done chan error
}

func newMachine(t *testing.T, root, name string, controlPlane bool, bootstrap []byte) *machine {
	t.Helper()
	dir := filepath.Join(root, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	mj, _ := json.Marshal(map[string]any{
		"namespace": "default", "cluster": "c1", "machine": name, "hostname": name,
		"providerID": "local://default/" + name, "version": "v1.34.2", "controlPlane": controlPlane,
	})
	if err := os.WriteFile(filepath.Join(dir, "machine.json"), mj, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bootstrap-data"), bootstrap, 0o600); err != nil {
		t.Fatal(err)
	}
	return &machine{t: t, name: name, dir: dir}
}

func (m *machine) start() {
	m.t.Helper()
	log, err := os.OpenFile(filepath.Join(m.dir, "node.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		m.t.Fatal(err)
	}
	m.cmd = exec.Command(env.Binary, "node", "run", "--dir", m.dir, "-v", "1")
	m.cmd.Stdout, m.cmd.Stderr = log, log
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := m.cmd.Start(); err != nil {
		m.t.Fatal(err)
	}
	_ = log.Close()
	m.done = make(chan error, 1)
	go func() { m.done <- m.cmd.Wait() }()
	m.t.Cleanup(func() { m.stop(false) })
}

// stop sends SIGTERM and waits; the process is killed if it lingers.
// It returns the exit error (nil for exit 0).
func (m *machine) stop(check bool) error {
	if m.cmd == nil || m.done == nil {
		return nil
	}
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	var err error
	select {
	case err = <-m.done:
	case <-time.After(60 * time.Second):
		_ = m.cmd.Process.Kill()
		err = <-m.done
		if check {
			m.t.Errorf("%s did not stop within 60s of SIGTERM", m.name)
		}
	}
	m.done = nil
	return err
}

func (m *machine) fullLog() string {
	b, _ := os.ReadFile(filepath.Join(m.dir, "node.log"))
	return string(b)
}

// log is the end of the machine's log, for failure messages.
func (m *machine) log() string {
	s := m.fullLog()
	if len(s) > 8000 {
		s = "…" + s[len(s)-8000:]
	}
	return s
}

func (m *machine) status() map[string]any {
	b, err := os.ReadFile(filepath.Join(m.dir, "status.json"))
	if err != nil {
		return nil
	}
	var s map[string]any
	_ = json.Unmarshal(b, &s)
	return s
}

// waitRunning waits for status Running and returns the API endpoint when
// the machine runs an API server.
func (m *machine) waitRunning(timeout time.Duration) {
	m.t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		s := m.status()
		if fmt.Sprint(s["pid"]) != fmt.Sprint(m.cmd.Process.Pid) {
			// status.json of an earlier process
			s = nil
		}
		if s["phase"] == "Running" {
			return
		}
		if s["phase"] == "Failed" {
			m.t.Fatalf("%s failed: %v\n%s", m.name, s["message"], m.log())
		}
		select {
		case err := <-m.done:
			m.done = nil
			m.t.Fatalf("%s exited early: %v\n%s", m.name, err, m.log())
		case <-time.After(200 * time.Millisecond):
		}
	}
	m.t.Fatalf("%s not Running after %s: status %v\n%s", m.name, timeout, m.status(), m.log())
}

func (m *machine) endpoint() string {
	m.t.Helper()
	b, err := os.ReadFile(filepath.Join(m.dir, "apiserver-endpoint"))
	if err != nil {
		m.t.Fatalf("%s: %v", m.name, err)
	}
	return strings.TrimSpace(string(b))
}

func waitNodeReady(t *testing.T, cs kubernetes.Interface, name string, timeout time.Duration, logs func() string) *corev1.Node {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		n, err := cs.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
		if err == nil {
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
					return n
				}
			}
			last = fmt.Sprintf("conditions %v", n.Status.Conditions)
		} else {
			last = err.Error()
		}
		time.Sleep(300 * time.Millisecond)
	}
	t.Fatalf("node %s not Ready after %s: %s\n%s", name, timeout, last, logs())
	return nil
}

const initConfig = `apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
clusterName: c1
controlPlaneEndpoint: %s
kubernetesVersion: v1.34.2
networking:
  serviceSubnet: 10.128.0.0/12
  podSubnet: 192.168.0.0/16
---
apiVersion: kubeadm.k8s.io/v1beta4
kind: InitConfiguration
nodeRegistration:
  name: '{{ ds.meta_data.local_hostname }}'
  kubeletExtraArgs:
  - name: node-labels
    value: e2e=control-plane
`

func joinConfig(endpoint, pin string, controlPlane bool) string {
	cp := ""
	if controlPlane {
		cp = "controlPlane:\n  localAPIEndpoint:\n    advertiseAddress: 127.0.0.1\n"
	}
	return fmt.Sprintf(`apiVersion: kubeadm.k8s.io/v1beta3
kind: JoinConfiguration
%sdiscovery:
  bootstrapToken:
    apiServerEndpoint: %s
    token: abcdef.0123456789abcdef
    caCertHashes:
    - %s
nodeRegistration:
  name: '{{ ds.meta_data.local_hostname }}'
`, cp, endpoint, pin)
}

// TestNodeRunInitAndJoin boots a control-plane machine with kubeadm init,
// joins a worker with a bootstrap token, and checks both Nodes from the
// workload cluster's API as a user would.
func TestNodeRunInitAndJoin(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	root := t.TempDir()
	pki := newClusterPKI(t)
	// The cluster's endpoint is its load balancer, as the local provider
	// sets it up: machines publish apiserver-endpoint files it forwards to.
	lbEndpoint := startLoadBalancer(t, root)

	files := append(pki.writeFiles(t), map[string]any{"path": "/run/kubeadm/kubeadm.yaml", "permissions": "0640", "content": fmt.Sprintf(initConfig, lbEndpoint)})
	cp1 := newMachine(t, root, "c1-cp-1", true, cloudConfig(t, files, []string{
		"mkdir -p /etc/kubernetes/manifests",
		"kubeadm init --config /run/kubeadm/kubeadm.yaml && echo success > /run/cluster-api/bootstrap-success.complete",
		"apt-get install -y jq",
	}))
	cp1.start()
	cp1.waitRunning(4 * time.Minute)

	st := cp1.status()
	bs, _ := st["bootstrap"].(map[string]any)
	if bs["complete"] != true || !strings.Contains(fmt.Sprint(bs["skipped"]), "apt-get") {
		t.Errorf("status bootstrap = %v, want complete with the apt-get command skipped", bs)
	}
	if _, err := os.Stat(filepath.Join(cp1.dir, "rootfs/run/cluster-api/bootstrap-success.complete")); err != nil {
		t.Errorf("bootstrap sentinel: %v", err)
	}
	endpoint := cp1.endpoint()
	if fmt.Sprint(st["apiServerPort"]) == "" || !strings.HasSuffix(endpoint, fmt.Sprint(st["apiServerPort"])) {
		t.Errorf("apiserver-endpoint %q does not match status apiServerPort %v", endpoint, st["apiServerPort"])
	}
	admin := pki.admin(t, lbEndpoint)

	node := waitNodeReady(t, admin, "c1-cp-1", 2*time.Minute, cp1.log)
	if node.Spec.ProviderID != "local://default/c1-cp-1" || node.Status.NodeInfo.KubeletVersion != "v1.34.2" {
		t.Errorf("node providerID %q kubelet %q", node.Spec.ProviderID, node.Status.NodeInfo.KubeletVersion)
	}
	// Labels set with the admin credential, the not-ready taint's removal
	// and the mirror pods follow the Node's registration by a moment.
	fixture.Eventually(t, "the control-plane Node labelled and tainted", time.Minute, func(context.Context) string {
		node, err := admin.CoreV1().Nodes().Get(ctx, "c1-cp-1", metav1.GetOptions{})
		if err != nil {
			return fixture.Reason(err)
		}
		if _, ok := node.Labels["node-role.kubernetes.io/control-plane"]; !ok || node.Labels["e2e"] != "control-plane" {
			return fmt.Sprintf("control-plane node labels = %v", node.Labels)
		}
		if len(node.Spec.Taints) != 1 || node.Spec.Taints[0].Key != "node-role.kubernetes.io/control-plane" || node.Spec.Taints[0].Effect != corev1.TaintEffectNoSchedule {
			return fmt.Sprintf("control-plane node taints = %v, want kubeadm's default", node.Spec.Taints)
		}
		return ""
	})
	cm, err := admin.CoreV1().ConfigMaps("kube-system").Get(ctx, "kubeadm-config", metav1.GetOptions{})
	if err != nil || !strings.Contains(cm.Data["ClusterConfiguration"], "clusterName: c1") {
		t.Errorf("kubeadm-config: %v %v", err, cm.Data)
	}
	fixture.Eventually(t, "the mirror pods advertising the machine's addresses", time.Minute, func(context.Context) string {
		etcdPod, err := admin.CoreV1().Pods("kube-system").Get(ctx, "etcd-c1-cp-1", metav1.GetOptions{})
		if err != nil {
			return fixture.Reason(err)
		}
		if u := etcdPod.Annotations["kubeadm.kubernetes.io/etcd.advertise-client-urls"]; u != fmt.Sprint(cp1.status()["etcdClientURL"]) {
			return fmt.Sprintf("etcd mirror pod advertises %q, status.json says %v", u, cp1.status()["etcdClientURL"])
		}
		apiPod, err := admin.CoreV1().Pods("kube-system").Get(ctx, "kube-apiserver-c1-cp-1", metav1.GetOptions{})
		if err != nil {
			return fixture.Reason(err)
		}
		if e := apiPod.Annotations["kubeadm.kubernetes.io/kube-apiserver.advertise-address.endpoint"]; e != endpoint {
			return fmt.Sprintf("kube-apiserver mirror pod endpoint %q, want %q", e, endpoint)
		}
		return ""
	})

	// A second node run on the same directory is refused while the first holds the lock.
	out, err := exec.Command(env.Binary, "node", "run", "--dir", cp1.dir).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "already running") {
		t.Errorf("second node run on a held directory: err %v, output %s", err, out)
	}

	// A bootstrap provider creates a bootstrap token for the worker.
	_, err = admin.CoreV1().Secrets("kube-system").Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "bootstrap-token-abcdef", Namespace: "kube-system"},
		Type:       corev1.SecretTypeBootstrapToken,
		StringData: map[string]string{
			"token-id": "abcdef", "token-secret": "0123456789abcdef",
			"usage-bootstrap-authentication": "true", "usage-bootstrap-signing": "true",
			"auth-extra-groups": "system:bootstrappers:kubeadm:default-node-token",
			"expiration":        time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pin := certs.PublicKeyPin(pki.ca.Cert)
	w1 := newMachine(t, root, "c1-md-0-w1", false, cloudConfig(t,
		[]map[string]any{{"path": "/run/kubeadm/kubeadm-join-config.yaml", "permissions": "0640", "content": joinConfig(lbEndpoint, pin, false)}},
		[]string{"kubeadm join --config /run/kubeadm/kubeadm-join-config.yaml && echo success > /run/cluster-api/bootstrap-success.complete"}))
	w1.start()
	w1.waitRunning(3 * time.Minute)
	worker := waitNodeReady(t, admin, "c1-md-0-w1", 2*time.Minute, w1.log)
	if worker.Spec.ProviderID != "local://default/c1-md-0-w1" {
		t.Errorf("worker providerID = %q", worker.Spec.ProviderID)
	}
	if len(worker.Spec.Taints) != 0 {
		t.Errorf("worker taints = %v", worker.Spec.Taints)
	}
	if _, err := os.Stat(filepath.Join(w1.dir, "apiserver-endpoint")); !os.IsNotExist(err) {
		t.Errorf("a worker published an API server endpoint: %v", err)
	}

	// A worker pinned to another CA refuses to join.
	other := newClusterPKI(t)
	w2 := newMachine(t, root, "c1-md-0-w2", false, cloudConfig(t,
		[]map[string]any{{"path": "/run/kubeadm/kubeadm-join-config.yaml", "content": joinConfig(lbEndpoint, certs.PublicKeyPin(other.ca.Cert), false)}},
		[]string{"kubeadm join --config /run/kubeadm/kubeadm-join-config.yaml"}))
	w2.start()
	select {
	case err := <-w2.done:
		w2.done = nil
		// The status names the failed step without its arguments (they can
		// carry the join token); kubeadm's own error is in the machine's log.
		if msg := fmt.Sprint(w2.status()["message"]); err == nil || !strings.Contains(msg, "run kubeadm (arguments not shown) failed") || strings.Contains(msg, "--config") {
			t.Errorf("join with a wrong CA pin: exit %v, status %v", err, w2.status())
		}
		if !strings.Contains(w2.fullLog(), "caCertHashes") {
			t.Errorf("join with a wrong CA pin: the machine's log does not say why:\n%s", w2.log())
		}
	case <-time.After(time.Minute):
		t.Errorf("join with a wrong CA pin did not fail:\n%s", w2.log())
	}

	// The worker stops cleanly and comes back from its saved state.
	if err := w1.stop(true); err != nil {
		t.Errorf("worker exit after SIGTERM: %v\n%s", err, w1.log())
	}
	w1.start()
	w1.waitRunning(time.Minute)
	if !strings.Contains(w1.fullLog(), "Restarting the components") {
		t.Errorf("restarted worker did not resume from its saved state:\n%s", w1.log())
	}

	// A second control-plane machine joins: etcd grows to two members and
	// its components appear as mirror pods.
	cpJoinFiles := append(pki.writeFiles(t), map[string]any{"path": "/run/kubeadm/kubeadm-join-config.yaml", "permissions": "0640", "content": joinConfig(lbEndpoint, pin, true)})
	cp2 := newMachine(t, root, "c1-cp-2", true, cloudConfig(t, cpJoinFiles,
		[]string{"kubeadm join --config /run/kubeadm/kubeadm-join-config.yaml && echo success > /run/cluster-api/bootstrap-success.complete"}))
	cp2.start()
	cp2.waitRunning(4 * time.Minute)
	waitNodeReady(t, admin, "c1-cp-2", 2*time.Minute, cp2.log)
	admin2 := pki.admin(t, cp2.endpoint())
	if _, err := admin2.CoreV1().Nodes().Get(ctx, "c1-md-0-w1", metav1.GetOptions{}); err != nil {
		t.Errorf("the joined control plane's API server does not serve the cluster's objects: %v", err)
	}
	members := etcdMembers(t, pki, fmt.Sprint(cp2.status()["etcdClientURL"]))
	if len(members) != 2 {
		t.Errorf("etcd members = %v, want c1-cp-1 and c1-cp-2", members)
	}
	for _, name := range []string{"etcd-c1-cp-2", "kube-apiserver-c1-cp-2", "kube-controller-manager-c1-cp-2", "kube-scheduler-c1-cp-2"} {
		fixture.Eventually(t, "mirror pod "+name, time.Minute, func(context.Context) string {
			_, err := admin.CoreV1().Pods("kube-system").Get(ctx, name, metav1.GetOptions{})
			return fixture.Reason(err)
		})
	}
	// Scale down as KubeadmControlPlane does: the machine leaves the load
	// balancer, then its etcd member goes, so the first control plane keeps
	// its quorum.
	patch := []byte(`{"metadata":{"annotations":{"capstan.dev/leave-load-balancer":"true"}}}`)
	if _, err := admin.CoreV1().Nodes().Patch(ctx, "c1-cp-2", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	// The answer follows the machine's API server's graceful stop, which
	// ControlPlane.Leave bounds at 60 s (a loaded CI machine took over 30).
	fixture.Eventually(t, "c1-cp-2 has left the load balancer", 75*time.Second, func(context.Context) string {
		n, err := admin.CoreV1().Nodes().Get(ctx, "c1-cp-2", metav1.GetOptions{})
		if err != nil {
			return fixture.Reason(err)
		}
		if n.Annotations["capstan.dev/left-load-balancer"] != "true" {
			return fmt.Sprintf("c1-cp-2 has not left the load balancer: annotations %v", n.Annotations)
		}
		if _, err := os.Stat(filepath.Join(cp2.dir, "apiserver-endpoint")); !os.IsNotExist(err) {
			return fmt.Sprintf("c1-cp-2 answered left but keeps its apiserver-endpoint: %v", err)
		}
		return ""
	})
	// Its etcd stops once removed, which is fatal to the machine: it
	// reports Failed and exits non-zero on its own.
	removeEtcdMember(t, pki, fmt.Sprint(cp1.status()["etcdClientURL"]), "c1-cp-2")
	select {
	case err := <-cp2.done:
		cp2.done = nil
		st := cp2.status()
		if err == nil || st["phase"] != "Failed" || !strings.Contains(fmt.Sprint(st["message"]), "etcd") {
			t.Errorf("machine whose etcd member was removed: exit %v, status %v", err, st)
		}
		if _, err := os.Stat(filepath.Join(cp2.dir, "apiserver-endpoint")); !os.IsNotExist(err) {
			t.Errorf("a failed machine left its apiserver-endpoint: %v", err)
		}
	case <-time.After(90 * time.Second):
		t.Errorf("machine whose etcd member was removed still runs:\n%s", cp2.log())
		_ = cp2.stop(false)
	}

	// The control plane stops cleanly and withdraws its endpoint.
	if err := cp1.stop(true); err != nil {
		t.Errorf("control plane exit after SIGTERM: %v\n%s", err, cp1.log())
	}
	if _, err := os.Stat(filepath.Join(cp1.dir, "apiserver-endpoint")); !os.IsNotExist(err) {
		t.Errorf("apiserver-endpoint left after stop: %v", err)
	}

	// Rebooted, the control-plane machine starts its components again on
	// the same ports with the same data, without initialising anew.
	cp1.start()
	cp1.waitRunning(4 * time.Minute)
	if !strings.Contains(cp1.fullLog(), "Restarting the components") {
		t.Errorf("restarted control plane did not resume from its saved state:\n%s", cp1.log())
	}
	if got := cp1.endpoint(); got != endpoint {
		t.Errorf("restarted control plane serves at %s, was %s", got, endpoint)
	}
	fixture.Eventually(t, "the worker Node and the bootstrap token kept over the restart", 2*time.Minute, func(context.Context) string {
		n, err := admin.CoreV1().Nodes().Get(ctx, "c1-md-0-w1", metav1.GetOptions{})
		if err != nil {
			return fixture.Reason(err)
		}
		if n.Spec.ProviderID != "local://default/c1-md-0-w1" {
			return fmt.Sprintf("worker node lost after the restart: %+v", n.Spec)
		}
		_, err = admin.CoreV1().Secrets("kube-system").Get(ctx, "bootstrap-token-abcdef", metav1.GetOptions{})
		return fixture.Reason(err)
	})
	waitNodeReady(t, admin, "c1-cp-1", 2*time.Minute, cp1.log)
	if err := cp1.stop(true); err != nil {
		t.Errorf("restarted control plane exit after SIGTERM: %v\n%s", err, cp1.log())
	}
}

// etcdMembers lists the etcd cluster's member names with a client
// certificate from the etcd CA, as KubeadmControlPlane would.
func etcdMembers(t *testing.T, pki *clusterPKI, url string) []string {
	t.Helper()
	cli := etcdClient(t, pki, url)
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cli.MemberList(ctx)
	if err != nil {
		t.Fatalf("etcd member list at %s: %v", url, err)
	}
	var names []string
	for _, m := range resp.Members {
		names = append(names, m.Name)
	}
	return names
}

func etcdClient(t *testing.T, pki *clusterPKI, url string) *clientv3.Client {
	t.Helper()
	kp, err := pki.etcd.Issue(certs.Request{CommonName: "e2e-etcd-client", Client: true}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(pki.etcd.Cert)
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{url},
		DialTimeout: 10 * time.Second,
		TLS:         &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{{Certificate: [][]byte{kp.Cert.Raw}, PrivateKey: kp.Key}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return cli
}

func removeEtcdMember(t *testing.T, pki *clusterPKI, url, name string) {
	t.Helper()
	cli := etcdClient(t, pki, url)
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, err := cli.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range resp.Members {
		if m.Name == name {
			// etcd refuses to remove a member until the others have been
			// connected for a while ("unhealthy cluster"): retry.
			var err error
			for i := 0; i < 30; i++ {
				if _, err = cli.MemberRemove(ctx, m.ID); err == nil {
					return
				}
				time.Sleep(time.Second)
			}
			t.Fatalf("removing etcd member %s: %v", name, err)
		}
	}
	t.Fatalf("no etcd member %s", name)
}

// startLoadBalancer runs `capstan node lb` for machines under root and
// returns its endpoint.
func startLoadBalancer(t *testing.T, root string) string {
	t.Helper()
	dir := filepath.Join(root, "lb")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	cfg, _ := json.Marshal(map[string]any{"port": port, "machinesDir": root})
	if err := os.WriteFile(filepath.Join(dir, "lb.json"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	log, err := os.Create(filepath.Join(dir, "lb.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(env.Binary, "node", "lb", "--dir", dir)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	_ = log.Close()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	return fmt.Sprintf("127.0.0.1:%d", port)
}
