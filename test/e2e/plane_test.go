package e2e

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/certs"
)

// seed creates a namespace, a Cluster, a Machine and a Secret, and returns
// them as they were stored.
func seed(t *testing.T, c client.Client) []client.Object {
	t.Helper()
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "keep"}}
	cluster := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: "c1", Namespace: "keep", Labels: map[string]string{"team": "a"}},
		Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{
			APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "LocalCluster", Name: "c1",
		}},
	}
	machine := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: "m1", Namespace: "keep"},
		Spec: clusterv1.MachineSpec{
			ClusterName: "c1",
			Version:     "v1.35.0",
			Bootstrap:   clusterv1.Bootstrap{DataSecretName: ptrTo("m1-bootstrap")},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "LocalMachine", Name: "m1",
			},
		},
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "m1-bootstrap", Namespace: "keep"},
		Data:       map[string][]byte{"value": []byte("#cloud-config\n")},
	}
	objs := []client.Object{ns, cluster, machine, secret}
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil {
			t.Fatalf("creating %T: %v", o, err)
		}
	}
	return objs
}

// expectKept reads every seeded object back and compares what a user set.
func expectKept(t *testing.T, c client.Client, objs []client.Object) {
	t.Helper()
	ctx := context.Background()
	for _, want := range objs {
		got := want.DeepCopyObject().(client.Object)
		if err := c.Get(ctx, client.ObjectKeyFromObject(want), got); err != nil {
			t.Fatalf("%T %s lost: %v", want, want.GetName(), err)
		}
		if got.GetUID() != want.GetUID() {
			t.Errorf("%T %s: uid %s, want %s (recreated, not kept)", want, want.GetName(), got.GetUID(), want.GetUID())
		}
		switch w := want.(type) {
		case *clusterv1.Cluster:
			if g := got.(*clusterv1.Cluster); g.Spec.InfrastructureRef != w.Spec.InfrastructureRef || g.Labels["team"] != "a" {
				t.Errorf("cluster changed: %+v", g)
			}
		case *clusterv1.Machine:
			if g := got.(*clusterv1.Machine); g.Spec.Version != w.Spec.Version || g.Spec.ClusterName != w.Spec.ClusterName {
				t.Errorf("machine changed: %+v", g.Spec)
			}
		case *corev1.Secret:
			if g := got.(*corev1.Secret); string(g.Data["value"]) != string(w.Data["value"]) {
				t.Errorf("secret changed: %q", g.Data["value"])
			}
		}
	}
}

func TestDownUpKeepsEveryObject(t *testing.T) {
	t.Parallel()
	p := newPlane(t)
	out := p.up()
	for _, want := range []string{"kubeconfig: " + filepath.Join(p.dir, "kubeconfig"), "export KUBECONFIG=", "capstan down"} {
		if !strings.Contains(out, want) {
			t.Errorf("up output lacks %q:\n%s", want, out)
		}
	}
	if ok, status := p.running(); !ok || !strings.Contains(status, "pid:") || !strings.Contains(status, "since:") {
		t.Fatalf("status after up (running=%v):\n%s", ok, status)
	}
	// The binary is built without Kubernetes' version ldflags (make build
	// sets none, like go install): the plane still reports its release, which
	// clients such as clusterctl require.
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(p.dir, "kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	info, err := discovery.NewDiscoveryClientForConfigOrDie(cfg).ServerVersion()
	if err != nil || info.Major != "1" || !strings.HasPrefix(info.GitVersion, "v1.") || strings.Contains(info.GitVersion, "master") {
		t.Errorf("the plane reports version %+v (%v), want Kubernetes v1.x", info, err)
	}
	if out, _ := capstan(t, "version"); !strings.Contains(out, "(kubernetes "+info.GitVersion+")") {
		t.Errorf("capstan version says %q, the plane %s", out, info.GitVersion)
	}
	objs := seed(t, p.client())
	p.down()
	if _, code := capstan(t, "status", "--state-dir", p.dir); code != 3 {
		t.Fatalf("status after down exited %d, want 3 (not running)", code)
	}
	p.up()
	expectKept(t, p.client(), objs)
}

// A state directory from before the plane's etcd had a CA of its own
// (etcd's serving and the API server's etcd client certificates signed by
// the plane's CA, no pki/etcd/) starts with every object kept: the plane
// migrates it to the etcd CA, and the admin's kubeconfig still works.
func TestStateDirFromBeforeTheEtcdCAStartsWithItsObjects(t *testing.T) {
	t.Parallel()
	p := newPlane(t)
	p.up()
	objs := seed(t, p.client())
	p.down()

	pki := filepath.Join(p.dir, "pki")
	ca, err := certs.Load(filepath.Join(pki, "ca.crt"), filepath.Join(pki, "ca.key"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(pki, "etcd")); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for name, req := range map[string]certs.Request{
		"etcd-server": {CommonName: "capstan-etcd", Server: true, Client: true, DNSNames: []string{"localhost"},
			IPs: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}},
		"apiserver-etcd-client": {CommonName: "capstan-apiserver-etcd-client", Client: true},
	} {
		req.Lifetime, req.KeyAlgorithm = 24*time.Hour, certs.ECDSAP256
		kp, err := ca.Issue(req, now)
		if err != nil {
			t.Fatal(err)
		}
		if err := kp.Write(filepath.Join(pki, name+".crt"), filepath.Join(pki, name+".key")); err != nil {
			t.Fatal(err)
		}
	}
	kubeconfigBefore, _ := os.ReadFile(filepath.Join(p.dir, "kubeconfig"))

	p.up()
	expectKept(t, p.client(), objs)
	etcdCA, err := certs.Load(filepath.Join(pki, "etcd", "ca.crt"), filepath.Join(pki, "etcd", "ca.key"))
	if err != nil {
		t.Fatalf("the plane did not make its etcd CA: %v", err)
	}
	client, err := certs.Load(filepath.Join(pki, "apiserver-etcd-client.crt"), filepath.Join(pki, "apiserver-etcd-client.key"))
	if err != nil || client.Cert.CheckSignatureFrom(etcdCA.Cert) != nil {
		t.Errorf("the API server's etcd client certificate is not the etcd CA's (%v)", err)
	}
	if _, err := os.Stat(filepath.Join(pki, "etcd-server.key")); !os.IsNotExist(err) {
		t.Errorf("the old etcd serving key is still there (%v)", err)
	}
	if after, _ := os.ReadFile(filepath.Join(p.dir, "kubeconfig")); !bytes.Equal(after, kubeconfigBefore) {
		t.Error("the admin's kubeconfig changed across the migration")
	}
}

func TestKilledInstanceRecovers(t *testing.T) {
	t.Parallel()
	p := newPlane(t)
	p.up()
	objs := seed(t, p.client())
	p.kill()
	out, code := capstan(t, "status", "--state-dir", p.dir)
	if code != 3 || !strings.Contains(out, "without a clean stop") {
		t.Fatalf("status after kill -9 exited %d:\n%s", code, out)
	}
	p.up()
	expectKept(t, p.client(), objs)
}

func TestStateDirInUseIsRefused(t *testing.T) {
	t.Parallel()
	p := newPlane(t)
	p.up()
	pid := strconv.Itoa(p.pid())

	out, code := capstan(t, "up", "--foreground", "--state-dir", p.dir)
	if code == 0 || !strings.Contains(out, "in use by capstan process "+pid) || !strings.Contains(out, "capstan down") {
		t.Errorf("second foreground up exited %d:\n%s", code, out)
	}
	// A detached up over a running plane is not an error: it reports it.
	out, code = capstan(t, "up", "--state-dir", p.dir)
	if code != 0 || !strings.Contains(out, "already running (pid "+pid) {
		t.Errorf("second up exited %d:\n%s", code, out)
	}
	if ok, _ := p.running(); !ok || strconv.Itoa(p.pid()) != pid {
		t.Error("the first plane did not survive the second up")
	}
}

func TestTakenPortIsReportedAndCanBeMoved(t *testing.T) {
	t.Parallel()
	p := newPlane(t)
	p.up()
	objs := seed(t, p.client())
	p.down()

	kubeconfig, err := os.ReadFile(filepath.Join(p.dir, "kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	server := serverOf(t, string(kubeconfig))
	squatter, err := net.Listen("tcp", server)
	if err != nil {
		t.Fatal(err)
	}
	defer squatter.Close()
	port := server[strings.LastIndex(server, ":")+1:]

	out, code := capstan(t, "up", "--state-dir", p.dir)
	if code == 0 || !strings.Contains(out, "port "+port) || !strings.Contains(out, "--api-port") {
		t.Fatalf("up with the API port taken exited %d:\n%s", code, out)
	}
	if ok, _ := p.running(); ok {
		t.Fatal("plane runs although its port is taken")
	}

	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	newPort := strconv.Itoa(free.Addr().(*net.TCPAddr).Port)
	free.Close()
	if out, code := capstan(t, "up", "--state-dir", p.dir, "--api-port", newPort); code != 0 {
		t.Fatalf("up --api-port exited %d:\n%s", code, out)
	}
	kubeconfig, _ = os.ReadFile(filepath.Join(p.dir, "kubeconfig"))
	if got := serverOf(t, string(kubeconfig)); got != "127.0.0.1:"+newPort {
		t.Errorf("kubeconfig server %s, want port %s", got, newPort)
	}
	expectKept(t, p.client(), objs)
}

func TestUnusableStateDirIsReported(t *testing.T) {
	t.Parallel()
	// A regular file where a directory should be: refused even for root,
	// which ignores permission bits.
	blocker := filepath.Join(t.TempDir(), "not-a-dir")
	if err := os.WriteFile(blocker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(blocker, "state")
	out, code := capstan(t, "up", "--state-dir", dir)
	if code == 0 || !strings.Contains(out, dir) || !strings.Contains(out, "--state-dir") {
		t.Errorf("up over an unusable state dir exited %d:\n%s", code, out)
	}
	if os.Getuid() != 0 {
		ro := filepath.Join(t.TempDir(), "ro")
		if err := os.Mkdir(ro, 0o500); err != nil {
			t.Fatal(err)
		}
		out, code := capstan(t, "up", "--state-dir", ro)
		if code == 0 || !strings.Contains(out, "not writable") {
			t.Errorf("up over a read-only state dir exited %d:\n%s", code, out)
		}
	}
}

func serverOf(t *testing.T, kubeconfig string) string {
	t.Helper()
	for _, line := range strings.Split(kubeconfig, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "server: https://"); ok {
			return rest
		}
	}
	t.Fatalf("no server in kubeconfig:\n%s", kubeconfig)
	return ""
}

func ptrTo[T any](v T) *T { return &v }
