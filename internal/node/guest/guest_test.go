package guest_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	bootstrapv1 "capstan.dev/capstan/api/bootstrap/kubeadm/v1beta2"
	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/controllers/kubeadmconfig"
	"capstan.dev/capstan/internal/node/agent"
	"capstan.dev/capstan/internal/node/cloudinit"
	"capstan.dev/capstan/internal/node/guest"
	"capstan.dev/capstan/internal/testenv"
	"capstan.dev/capstan/internal/workload"
	"capstan.dev/capstan/test/fixture"
)

// mgmt is the management plane running the real KubeadmConfig controller,
// which produces the bootstrap data the guests boot from.
var mgmt *testenv.Env

func TestMain(m *testing.M) {
	fixture.MainWithManager(m, &mgmt, func(ctx context.Context, mgr ctrl.Manager) error {
		cc, err := workload.New(mgr.GetClient(), workload.Options{Scheme: mgr.GetScheme()})
		if err != nil {
			return err
		}
		if err := mgr.Add(cc); err != nil {
			return err
		}
		r := &kubeadmconfig.Reconciler{Client: mgr.GetClient(), Workload: cc, Recorder: mgr.GetEventRecorder("kubeadmconfig")}
		return r.SetupWithManager(ctx, mgr, controller.Options{})
	})
}

// serveService stands in for systemd: Start runs `capstan node serve` for
// its root in the test process, and restart stops and starts it again.
type serveService struct {
	t    *testing.T
	root string

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan error
}

func (s *serveService) Start(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel, s.done = cancel, make(chan error, 1)
	go func(done chan error) { done <- guest.Serve(ctx, s.root, ctrl.Log.WithName(filepath.Base(s.root))) }(s.done)
	return nil
}

// stop ends the serve process as systemd would (SIGTERM: its context) and
// returns how it ended.
func (s *serveService) stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cancel == nil {
		return nil
	}
	s.cancel()
	s.cancel = nil
	select {
	case err := <-s.done:
		return err
	case <-time.After(90 * time.Second):
		return errors.New("serve did not stop within 90s")
	}
}

// machine is one guest: a root directory, its hostname and provider ID.
type machine struct {
	name, root, providerID string
	svc                    *serveService
}

func newGuest(t *testing.T, ns, name string) *machine {
	root := filepath.Join(t.TempDir(), name)
	m := &machine{name: name, root: root, providerID: "qemu://" + ns + "/" + name}
	m.svc = &serveService{t: t, root: root}
	t.Cleanup(func() {
		if err := m.svc.stop(); err != nil {
			t.Errorf("stopping %s: %v", name, err)
		}
	})
	return m
}

// boot does what real cloud-init does with the bootstrap data: renders the
// jinja template with the NoCloud meta-data, writes the files, and runs
// runcmd, where `kubeadm init|join` is `capstan kubeadm` on the guest's root.
func (m *machine) boot(t *testing.T, data []byte, ports *agent.Ports) {
	t.Helper()
	cfg, err := cloudinit.Parse(data)
	if err != nil {
		t.Fatalf("bootstrap data: %v", err)
	}
	steps, err := cloudinit.Plan(cfg, cloudinit.Options{Root: m.root, Hostname: m.name,
		TemplateVars: map[string]string{"ds.meta_data.provider_id": m.providerID}})
	if err != nil {
		t.Fatal(err)
	}
	opts := func(hostConfig string) guest.Options {
		return guest.Options{
			Root: m.root, Config: strings.TrimPrefix(hostConfig, m.root), Hostname: "not-" + m.name,
			Ports: ports, Service: m.svc, Ready: 3 * time.Minute, Log: ctrl.Log.WithName("kubeadm-" + m.name),
		}
	}
	runner := &agent.Runner{
		Root: m.root, Log: ctrl.Log.WithName("cloud-init-" + m.name),
		Init: func(ctx context.Context, p string) error { return guest.Init(ctx, opts(p)) },
		Join: func(ctx context.Context, p string) error { return guest.Join(ctx, opts(p)) },
	}
	rep, err := cloudinit.Apply(context.Background(), steps, runner)
	if err != nil || !rep.Complete {
		t.Fatalf("cloud-init on %s: %v\n%s", m.name, err, rep.String())
	}
	if _, err := os.Stat(filepath.Join(m.root, "run/cluster-api/bootstrap-success.complete")); err != nil {
		t.Errorf("%s: no bootstrap-success file after kubeadm returned: %v", m.name, err)
	}
}

// bootstrapData creates a Machine with its KubeadmConfig and waits for the
// controller's bootstrap data.
func bootstrapData(t *testing.T, c *clusterv1.Cluster, name string, controlPlane bool) []byte {
	t.Helper()
	ctx := context.Background()
	reg := bootstrapv1.NodeRegistrationOptions{
		Name: "{{ ds.meta_data.local_hostname }}",
		// What a provider's templates set so the Node carries the
		// Machine's provider ID.
		KubeletExtraArgs: []bootstrapv1.Arg{{Name: "provider-id", Value: ptr.To("{{ ds.meta_data.provider_id }}")}},
	}
	spec := bootstrapv1.KubeadmConfigSpec{JoinConfiguration: bootstrapv1.JoinConfiguration{NodeRegistration: reg}}
	if controlPlane {
		spec = bootstrapv1.KubeadmConfigSpec{InitConfiguration: bootstrapv1.InitConfiguration{NodeRegistration: reg}}
	}
	cfg := &bootstrapv1.KubeadmConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: name, Labels: map[string]string{clusterv1.ClusterNameLabel: c.Name}},
		Spec:       spec,
	}
	fixture.Create(t, mgmt.Client, cfg)
	m := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: name, Labels: map[string]string{clusterv1.ClusterNameLabel: c.Name}},
		Spec: clusterv1.MachineSpec{
			ClusterName: c.Name, Version: "v1.34.2",
			Bootstrap: clusterv1.Bootstrap{ConfigRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: bootstrapv1.GroupVersion.Group, Kind: "KubeadmConfig", Name: name}},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.example.com", Kind: "TestMachine", Name: name},
		},
	}
	if controlPlane {
		m.Labels[clusterv1.MachineControlPlaneLabel] = ""
	}
	fixture.Create(t, mgmt.Client, m)
	// The Machine controller's part: the Machine controls its config.
	before := cfg.DeepCopy()
	cfg.OwnerReferences = []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Machine", Name: m.Name, UID: m.UID, Controller: ptr.To(true)}}
	if err := mgmt.Client.Patch(ctx, cfg, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	var data []byte
	fixture.Eventually(t, "bootstrap data of "+name, 60*time.Second, func(ctx context.Context) string {
		if err := mgmt.Client.Get(ctx, client.ObjectKeyFromObject(cfg), cfg); err != nil {
			return err.Error()
		}
		if cfg.Status.DataSecretName == "" {
			return fmt.Sprintf("no data secret yet: %+v", cfg.Status.Conditions)
		}
		s := &corev1.Secret{}
		if err := mgmt.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: cfg.Status.DataSecretName}, s); err != nil {
			return err.Error()
		}
		data = s.Data["value"]
		return ""
	})
	return data
}

func setClusterStatus(t *testing.T, c *clusterv1.Cluster, patch string) {
	t.Helper()
	if err := mgmt.Client.Status().Patch(context.Background(), c, client.RawPatch("application/merge-patch+json", []byte(patch))); err != nil {
		t.Fatal(err)
	}
}

// TestKubeadmInitAndJoinInGuests boots a control-plane guest and a worker
// guest from the KubeadmConfig controller's bootstrap data, on the host:
// each guest is a root directory, systemd is serveService, and the
// control-plane endpoint is a TCP proxy standing for the host's load
// balancer.
func TestKubeadmInitAndJoinInGuests(t *testing.T) {
	ctx := context.Background()
	ns := mgmt.Namespace(t)
	cpPorts := &agent.Ports{APIServer: fixture.FreePort(t), EtcdClient: fixture.FreePort(t), EtcdPeer: fixture.FreePort(t)}
	lb := fixture.NewProxy(t, fmt.Sprintf("127.0.0.1:%d", cpPorts.APIServer))
	host, port, _ := strings.Cut(lb.Addr(), ":")
	lbPort, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}

	c := fixture.NewCluster(ns, "c1", func(c *clusterv1.Cluster) {
		c.Spec.ControlPlaneEndpoint = clusterv1.APIEndpoint{Host: host, Port: int32(lbPort)}
	})
	fixture.Create(t, mgmt.Client, c)
	setClusterStatus(t, c, `{"status":{"initialization":{"infrastructureProvisioned":true}}}`)

	cp := newGuest(t, ns, "cp-0")
	cp.boot(t, bootstrapData(t, c, "cp-0", true), cpPorts)

	// kubeadm init returned: the API server answers through the endpoint,
	// with kubeadm's objects uploaded.
	adminConf, err := os.ReadFile(filepath.Join(cp.root, "etc/kubernetes/admin.conf"))
	if err != nil {
		t.Fatal(err)
	}
	restCfg, err := clientcmd.RESTConfigFromKubeConfig(adminConf)
	if err != nil {
		t.Fatal(err)
	}
	if restCfg.Host != "https://"+lb.Addr() {
		t.Errorf("admin.conf server %s, want the endpoint https://%s", restCfg.Host, lb.Addr())
	}
	cs := kubernetes.NewForConfigOrDie(restCfg)
	for _, o := range []struct{ ns, name string }{{"kube-system", "kubeadm-config"}, {"kube-public", "cluster-info"}} {
		if _, err := cs.CoreV1().ConfigMaps(o.ns).Get(ctx, o.name, metav1.GetOptions{}); err != nil {
			t.Errorf("kubeadm init returned without %s/%s: %v", o.ns, o.name, err)
		}
	}
	if lb.Accepted() == 0 {
		t.Error("nothing reached the API server through the endpoint")
	}
	wantNode(t, cs, "cp-0", cp.providerID)

	// The worker's bootstrap data needs the workload cluster reachable (its
	// bootstrap token is created there through c1-kubeconfig, which the
	// KubeadmConfig controller wrote with the init) and initialised.
	if err := mgmt.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "c1-kubeconfig"}, &corev1.Secret{}); err != nil {
		t.Fatalf("c1-kubeconfig: %v", err)
	}
	setClusterStatus(t, c, `{"status":{"initialization":{"controlPlaneInitialized":true}}}`)
	worker := newGuest(t, ns, "worker-0")
	worker.boot(t, bootstrapData(t, c, "worker-0", false), nil)
	// kubeadm join returned only once the kubelet registered the Node.
	if n, err := cs.CoreV1().Nodes().Get(ctx, "worker-0", metav1.GetOptions{}); err != nil {
		t.Errorf("kubeadm join returned before the Node was registered: %v", err)
	} else if n.Status.NodeInfo.KubeletVersion != "v1.34.2" {
		t.Errorf("worker's kubelet version %q, want the cluster's v1.34.2", n.Status.NodeInfo.KubeletVersion)
	}
	wantNode(t, cs, "worker-0", worker.providerID)

	// A reboot: systemd stops and starts the services; the same components
	// come back from the saved state, with the cluster's data.
	for _, m := range []*machine{worker, cp} {
		if err := m.svc.stop(); err != nil {
			t.Fatalf("stopping %s's service: %v", m.name, err)
		}
	}
	for _, m := range []*machine{cp, worker} {
		if err := m.svc.Start(ctx); err != nil {
			t.Fatal(err)
		}
	}
	restarted := time.Now()
	fixture.Eventually(t, "both kubelets heartbeat again after the restart", 3*time.Minute, func(ctx context.Context) string {
		for _, node := range []string{"cp-0", "worker-0"} {
			lease, err := cs.CoordinationV1().Leases("kube-node-lease").Get(ctx, node, metav1.GetOptions{})
			if err != nil {
				return err.Error()
			}
			if lease.Spec.RenewTime == nil || lease.Spec.RenewTime.Time.Before(restarted) {
				return fmt.Sprintf("%s's lease renewed at %v, before the restart at %v", node, lease.Spec.RenewTime, restarted)
			}
		}
		return ""
	})
	wantNode(t, cs, "cp-0", cp.providerID)
	if _, err := cs.CoreV1().Pods("kube-system").Get(ctx, "kube-apiserver-cp-0", metav1.GetOptions{}); err != nil {
		t.Errorf("the control plane's mirror pod after the restart: %v", err)
	}

	// kubeadm runs once per machine.
	err = guest.Init(ctx, guest.Options{Root: cp.root, Config: "/run/kubeadm/kubeadm.yaml", Hostname: "cp-0", Ports: cpPorts, Service: cp.svc})
	if err == nil || !strings.Contains(err.Error(), "held") {
		t.Errorf("kubeadm init while the service runs: %v", err)
	}
}

// wantNode waits for the Node to be registered and Ready with the provider
// ID the kubelet was given.
func wantNode(t *testing.T, cs kubernetes.Interface, name, providerID string) {
	t.Helper()
	fixture.Eventually(t, "Node "+name+" Ready", 2*time.Minute, func(ctx context.Context) string {
		n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		if n.Spec.ProviderID != providerID {
			return fmt.Sprintf("providerID %q, want %q", n.Spec.ProviderID, providerID)
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				return ""
			}
		}
		return fmt.Sprintf("not Ready: %+v", n.Status.Conditions)
	})
}

// recordingService counts the starts it is asked for.
type recordingService struct{ starts int }

func (r *recordingService) Start(context.Context) error { r.starts++; return nil }

// A kubeadm that fails exits with the reason and leaves no service behind:
// cloud-init logs the error and does not write bootstrap-success.
func TestKubeadmFailureStartsNoService(t *testing.T) {
	root := t.TempDir()
	cfg := filepath.Join(root, "run/kubeadm/kubeadm.yaml")
	if err := os.MkdirAll(filepath.Dir(cfg), 0o755); err != nil {
		t.Fatal(err)
	}
	join := "apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\ndiscovery:\n  bootstrapToken:\n    token: abcdef.0123456789abcdef\n    apiServerEndpoint: 127.0.0.1:1\n    unsafeSkipCAVerification: true\n"
	if err := os.WriteFile(cfg, []byte(join), 0o600); err != nil {
		t.Fatal(err)
	}
	svc := &recordingService{}
	err := guest.Init(context.Background(), guest.Options{Root: root, Config: "/run/kubeadm/kubeadm.yaml", Hostname: "m", Service: svc, Log: ctrl.Log})
	if err == nil || !strings.Contains(err.Error(), "kubeadm init") || !strings.Contains(err.Error(), "no InitConfiguration") {
		t.Fatalf("Init with a join configuration = %v", err)
	}
	if svc.starts != 0 {
		t.Errorf("the service was started %d times after a failed kubeadm init", svc.starts)
	}
	if _, err := os.Stat(filepath.Join(root, "etc/systemd/system", guest.UnitName)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("unit installed after a failed kubeadm init: %v", err)
	}
	err = guest.Join(context.Background(), guest.Options{Root: root, Config: "/run/kubeadm/missing.yaml", Hostname: "m", Service: svc, Log: ctrl.Log})
	if err == nil || !strings.Contains(err.Error(), "missing.yaml") {
		t.Errorf("Join with a missing configuration = %v", err)
	}
}
