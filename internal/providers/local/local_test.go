package local_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	localv1 "capstan.dev/capstan/api/infrastructure/local/v1beta2"
	"capstan.dev/capstan/internal/atomicfile"
	"capstan.dev/capstan/internal/lockfile"
	"capstan.dev/capstan/internal/providers/local"
	"capstan.dev/capstan/internal/providers/local/machinedir"
	"capstan.dev/capstan/internal/scheme"
	"capstan.dev/capstan/internal/testenv"
	"capstan.dev/capstan/test/fixture"
)

var (
	env *testenv.Env
	// fakeBinary stands in for capstan: a real load balancer and a machine
	// that boots at once (testdata/fakenode).
	fakeBinary string
)

func TestMain(m *testing.M) {
	if lock := os.Getenv(local.StubbornEnv); lock != "" {
		local.Stubborn(lock)
		return
	}
	if os.Getenv("CAPSTAN_TEST_LOGS") != "" {
		ctrl.SetLogger(zap.New(zap.UseDevMode(true)))
	} else {
		ctrl.SetLogger(zap.New(zap.WriteTo(io.Discard)))
	}
	code := func() int {
		dir, err := os.MkdirTemp("", "capstan-fakenode-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		fakeBinary = filepath.Join(dir, "fakenode")
		if out, err := exec.Command("go", "build", "-o", fakeBinary, "./testdata/fakenode").CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "building fakenode: %v\n%s", err, out)
			return 1
		}
		if env, err = testenv.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer env.Stop()
		return m.Run()
	}()
	os.Exit(code)
}

// startManager runs the local provider's controllers (only them: the
// tests play the core's part) over root until the returned stop is called
// (or the test ends).
func startManager(t *testing.T, ns, root string) (stop func()) {
	t.Helper()
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme: scheme.New(),
		// Objects of earlier tests may linger in their deleting namespaces.
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}},
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := local.Setup(ctx, mgr, local.Options{Dir: root, Binary: fakeBinary}); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			t.Errorf("manager: %v", err)
		}
	}()
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			cancel()
			<-done
		}
	}
	t.Cleanup(stop)
	return stop
}

// providerRoot is a directory for the test's machines; whatever process
// a failed test leaves there is killed at the end.
func providerRoot(t *testing.T) string {
	root := t.TempDir()
	t.Cleanup(func() {
		locks, _ := filepath.Glob(filepath.Join(root, "*", "*", "*", "*.lock"))
		more, _ := filepath.Glob(filepath.Join(root, "*", "*", "machines", "*", "*.lock"))
		for _, l := range append(locks, more...) {
			if pid, _ := lockfile.Holder(l); pid > 0 {
				t.Errorf("process %d still holds %s at the end of the test", pid, l)
				_ = syscall.Kill(-pid, syscall.SIGKILL)
			}
		}
	})
	return root
}

func alive(pid int32) bool { return pid > 0 && syscall.Kill(int(pid), 0) == nil }

// createLocalCluster creates a Cluster and its LocalCluster, owned by it as the
// Cluster controller would make it.
func createLocalCluster(t *testing.T, ns, name string, fds ...clusterv1.FailureDomain) (*clusterv1.Cluster, *localv1.LocalCluster) {
	t.Helper()
	c := fixture.NewCluster(ns, name, fixture.Infrastructure(&localv1.LocalCluster{ObjectMeta: metav1.ObjectMeta{Name: name}}))
	fixture.Create(t, env.Client, c)
	lc := &localv1.LocalCluster{ObjectMeta: metav1.ObjectMeta{
		Namespace: ns, Name: name,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster", Name: c.Name, UID: c.UID, Controller: ptr.To(true)}},
	}}
	lc.Spec.FailureDomains = fds
	fixture.Create(t, env.Client, lc)
	return c, lc
}

func waitClusterProvisioned(t *testing.T, lc *localv1.LocalCluster) {
	t.Helper()
	fixture.Eventually(t, "LocalCluster provisioned", 30*time.Second, func(ctx context.Context) string {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(lc), lc); err != nil {
			return err.Error()
		}
		if !ptr.Deref(lc.Status.Initialization.Provisioned, false) {
			return fmt.Sprintf("not provisioned: %+v", lc.Status)
		}
		return fixture.Condition(lc.Status.Conditions, localv1.ReadyCondition, metav1.ConditionTrue)
	})
}

func deleteAndWaitGone(t *testing.T, obj client.Object) {
	t.Helper()
	if err := env.Client.Delete(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, "deleting "+obj.GetName(), 30*time.Second, func(ctx context.Context) string {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		if apierrors.IsNotFound(err) {
			return ""
		}
		return fmt.Sprintf("still there (err %v, finalizers %v)", err, obj.GetFinalizers())
	})
}

func TestLocalClusterLoadBalancer(t *testing.T) {
	ns := env.Namespace(t)
	root := providerRoot(t)
	startManager(t, ns, root)
	_, lc := createLocalCluster(t, ns, "c1", clusterv1.FailureDomain{Name: "fd1", ControlPlane: ptr.To(true)}, clusterv1.FailureDomain{Name: "fd2"})
	waitClusterProvisioned(t, lc)

	ep := lc.Spec.ControlPlaneEndpoint
	if ep.Host != "127.0.0.1" || ep.Port == 0 {
		t.Fatalf("controlPlaneEndpoint = %+v, want 127.0.0.1 and a port", ep)
	}
	conn, err := net.DialTimeout("tcp", ep.String(), time.Second)
	if err != nil {
		t.Fatalf("the load balancer does not answer on %s: %v", ep, err)
	}
	conn.Close()
	if len(lc.Status.FailureDomains) != 2 || lc.Status.FailureDomains[0].Name != "fd1" || !ptr.Deref(lc.Status.FailureDomains[0].ControlPlane, false) {
		t.Errorf("status.failureDomains = %+v, want spec's", lc.Status.FailureDomains)
	}
	lbDir := filepath.Join(root, ns, "c1", "lb")
	raw, err := os.ReadFile(filepath.Join(lbDir, "lb.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Port        int32  `json:"port"`
		MachinesDir string `json:"machinesDir"`
	}
	if err := json.Unmarshal(raw, &cfg); err != nil || cfg.Port != ep.Port || cfg.MachinesDir != filepath.Join(root, ns, "c1", "machines") {
		t.Errorf("lb.json = %s (%v)", raw, err)
	}
	pid := lc.Status.LoadBalancer.PID
	if !alive(pid) {
		t.Fatalf("status.loadBalancer.pid %d is not a running process", pid)
	}

	// The endpoint is fixed once chosen.
	lc.Spec.ControlPlaneEndpoint.Port++
	if err := env.Client.Update(context.Background(), lc); err == nil || !strings.Contains(err.Error(), "immutable") {
		t.Errorf("changing the endpoint: want an immutability error, got %v", err)
	}

	// A load balancer that dies is brought back on the same port.
	if err := syscall.Kill(int(pid), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, "load balancer restarted", 30*time.Second, func(ctx context.Context) string {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(lc), lc); err != nil {
			return err.Error()
		}
		if p := lc.Status.LoadBalancer.PID; p == pid || !alive(p) || !lc.Status.LoadBalancer.Running {
			return fmt.Sprintf("load balancer %+v", lc.Status.LoadBalancer)
		}
		return fixture.Condition(lc.Status.Conditions, localv1.ReadyCondition, metav1.ConditionTrue)
	})
	newPID := lc.Status.LoadBalancer.PID

	deleteAndWaitGone(t, lc)
	if alive(newPID) {
		t.Errorf("load balancer %d still runs after its LocalCluster was deleted", newPID)
	}
	if _, err := os.Stat(filepath.Join(root, ns, "c1")); !os.IsNotExist(err) {
		t.Errorf("cluster directory left behind: %v", err)
	}
	if c, err := net.DialTimeout("tcp", ep.String(), time.Second); err == nil {
		c.Close()
		t.Errorf("something still listens on %s", ep)
	}
}

// newMachine creates a Machine with bootstrap data and its LocalMachine,
// owned and labelled as the Machine controller does.
func newMachine(t *testing.T, ns, cluster, name string, withData bool) (*clusterv1.Machine, *localv1.LocalMachine) {
	t.Helper()
	ctx := context.Background()
	m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{clusterv1.MachineControlPlaneLabel: ""}}}
	m.Spec.ClusterName = cluster
	m.Spec.Version = "v1.34.2"
	m.Spec.FailureDomain = "fd1"
	m.Spec.InfrastructureRef = clusterv1.ContractVersionedObjectReference{APIGroup: localv1.GroupVersion.Group, Kind: "LocalMachine", Name: name}
	m.Spec.Bootstrap.DataSecretName = ptr.To(name + "-bootstrap")
	if err := env.Client.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	if withData {
		createBootstrapSecret(t, ns, name)
	}
	lm := &localv1.LocalMachine{ObjectMeta: metav1.ObjectMeta{
		Namespace: ns, Name: name,
		Labels:          map[string]string{clusterv1.ClusterNameLabel: cluster},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Machine", Name: m.Name, UID: m.UID, Controller: ptr.To(true)}},
	}}
	if err := env.Client.Create(ctx, lm); err != nil {
		t.Fatal(err)
	}
	return m, lm
}

func createBootstrapSecret(t *testing.T, ns, machine string) {
	t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: machine + "-bootstrap"}, Data: map[string][]byte{"value": []byte("#cloud-config\n# " + machine + "\n")}}
	if err := env.Client.Create(context.Background(), s); err != nil {
		t.Fatal(err)
	}
}

func waitMachineRunning(t *testing.T, lm *localv1.LocalMachine) {
	t.Helper()
	fixture.Eventually(t, "LocalMachine running", 30*time.Second, func(ctx context.Context) string {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(lm), lm); err != nil {
			return err.Error()
		}
		if lm.Status.Process.Phase != localv1.LocalMachinePhaseRunning || !alive(lm.Status.Process.PID) {
			return fmt.Sprintf("process %+v", lm.Status.Process)
		}
		return fixture.Condition(lm.Status.Conditions, localv1.ReadyCondition, metav1.ConditionTrue)
	})
}

func startLines(t *testing.T, dir string) int {
	raw, err := os.ReadFile(filepath.Join(dir, "node.log"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(raw), "fakenode start")
}

func TestLocalMachineLifecycle(t *testing.T) {
	ns := env.Namespace(t)
	root := providerRoot(t)
	stop := startManager(t, ns, root)
	_, lc := createLocalCluster(t, ns, "c2")

	// Bootstrap data first: the machine waits for it and creates nothing.
	_, early := newMachine(t, ns, "c2", "c2-early", false)
	fixture.Eventually(t, "LocalMachine waiting for bootstrap data", 30*time.Second, func(ctx context.Context) string {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(early), early); err != nil {
			return err.Error()
		}
		c := meta.FindStatusCondition(early.Status.Conditions, localv1.ReadyCondition)
		if c == nil || c.Reason != localv1.WaitingForBootstrapReason {
			return fmt.Sprintf("Ready = %+v", c)
		}
		return ""
	})
	earlyDir := filepath.Join(root, ns, "c2", "machines", "c2-early")
	if _, err := os.Stat(earlyDir); !os.IsNotExist(err) {
		t.Errorf("machine directory created before its bootstrap data: %v", err)
	}

	waitClusterProvisioned(t, lc)
	_, lm := newMachine(t, ns, "c2", "c2-cp-0", true)
	waitMachineRunning(t, lm)
	dir := filepath.Join(root, ns, "c2", "machines", "c2-cp-0")
	if lm.Spec.ProviderID != "local://"+ns+"/c2-cp-0" {
		t.Errorf("providerID = %q", lm.Spec.ProviderID)
	}
	if !ptr.Deref(lm.Status.Initialization.Provisioned, false) || lm.Status.FailureDomain != "fd1" || lm.Spec.FailureDomain != "fd1" || lm.Status.Process.Dir != dir {
		t.Errorf("status = %+v", lm.Status)
	}
	wantAddrs := clusterv1.MachineAddresses{{Type: "InternalIP", Address: "127.0.0.1"}, {Type: "Hostname", Address: "c2-cp-0"}, {Type: "InternalDNS", Address: "c2-cp-0"}}
	if fmt.Sprint(lm.Status.Addresses) != fmt.Sprint(wantAddrs) {
		t.Errorf("addresses = %v, want %v", lm.Status.Addresses, wantAddrs)
	}
	if len(lm.Status.Process.BootstrapSkipped) != 1 || !lm.Status.Process.BootstrapComplete || lm.Status.Process.NodeName != "c2-cp-0" {
		t.Errorf("process status does not mirror status.json: %+v", lm.Status.Process)
	}
	if msg := fixture.Condition(lm.Status.Conditions, localv1.BootstrapSucceededCondition, metav1.ConditionTrue); msg != "" {
		t.Error(msg)
	}
	var mc machinedir.Machine
	raw, err := os.ReadFile(filepath.Join(dir, "machine.json"))
	if err == nil {
		err = json.Unmarshal(raw, &mc)
	}
	want := machinedir.Machine{Namespace: ns, Cluster: "c2", Machine: "c2-cp-0", Hostname: "c2-cp-0", ProviderID: "local://" + ns + "/c2-cp-0", Version: "v1.34.2", ControlPlane: true, FailureDomain: "fd1"}
	if err != nil || mc != want {
		t.Errorf("machine.json = %+v (%v), want %+v", mc, err, want)
	}
	if fi, err := os.Stat(filepath.Join(dir, "bootstrap-data")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("bootstrap-data: %v, %v; want mode 0600", fi, err)
	}
	if raw, _ := os.ReadFile(filepath.Join(dir, "bootstrap-data")); string(raw) != "#cloud-config\n# c2-cp-0\n" {
		t.Errorf("bootstrap-data = %q", raw)
	}
	pid := lm.Status.Process.PID

	// A new manager adopts the running machine: same process, none added.
	stop()
	startManager(t, ns, root)
	lm.Status.Process.Message = "changed by the test"
	if err := env.Client.Status().Update(context.Background(), lm); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, "status rewritten by the new manager", 30*time.Second, func(ctx context.Context) string {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(lm), lm); err != nil {
			return err.Error()
		}
		if lm.Status.Process.Message != "fake machine up" {
			return "message " + lm.Status.Process.Message
		}
		return ""
	})
	if lm.Status.Process.PID != pid || !alive(pid) {
		t.Fatalf("after a manager restart the machine runs as %d, want the adopted %d", lm.Status.Process.PID, pid)
	}
	if n := startLines(t, dir); n != 1 {
		t.Fatalf("the machine was started %d times, want once", n)
	}
	lbPID := lc.Status.LoadBalancer.PID
	fixture.Eventually(t, "load balancer adopted", 30*time.Second, func(ctx context.Context) string {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(lc), lc); err != nil {
			return err.Error()
		}
		if lc.Status.LoadBalancer.PID != lbPID || !alive(lbPID) {
			return fmt.Sprintf("load balancer %+v, want the adopted %d", lc.Status.LoadBalancer, lbPID)
		}
		return ""
	})

	// What the machine writes to status.json shows without any API event:
	// the directory is watched.
	failed := fmt.Sprintf(`{"pid": %d, "phase": "Failed", "message": "etcd would not start", "nodeName": "c2-cp-0", "bootstrap": {"complete": false, "failed": "runcmd[2]: boom"}}`, pid)
	if err := atomicfile.WriteFile(filepath.Join(dir, "status.json"), []byte(failed), 0o644); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, "failure reported", 30*time.Second, func(ctx context.Context) string {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(lm), lm); err != nil {
			return err.Error()
		}
		p := lm.Status.Process
		if p.Phase != localv1.LocalMachinePhaseFailed || p.Message != "etcd would not start" || p.BootstrapFailed != "runcmd[2]: boom" {
			return fmt.Sprintf("process %+v", p)
		}
		if msg := fixture.Condition(lm.Status.Conditions, localv1.BootstrapSucceededCondition, metav1.ConditionFalse); msg != "" {
			return msg
		}
		return fixture.Condition(lm.Status.Conditions, localv1.ReadyCondition, metav1.ConditionFalse)
	})

	// A machine whose process dies stays dead, and says so.
	if err := syscall.Kill(int(pid), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, "death reported", 30*time.Second, func(ctx context.Context) string {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(lm), lm); err != nil {
			return err.Error()
		}
		if lm.Status.Process.Phase != localv1.LocalMachinePhaseExited || lm.Status.Process.PID != 0 {
			return fmt.Sprintf("process %+v", lm.Status.Process)
		}
		if msg := fixture.Condition(lm.Status.Conditions, localv1.ProcessRunningCondition, metav1.ConditionFalse); msg != "" {
			return msg
		}
		return fixture.Condition(lm.Status.Conditions, localv1.ReadyCondition, metav1.ConditionFalse)
	})
	time.Sleep(time.Second)
	if held, _ := lockfile.Held(filepath.Join(dir, "node.lock")); held || startLines(t, dir) != 1 {
		t.Fatalf("the dead machine was restarted")
	}
	deleteAndWaitGone(t, lm)
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("machine directory left behind: %v", err)
	}

	// Deleting a running machine stops its process and removes everything.
	createBootstrapSecret(t, ns, "c2-early")
	waitMachineRunning(t, early)
	earlyPID := early.Status.Process.PID
	deleteAndWaitGone(t, early)
	if alive(earlyPID) {
		t.Errorf("machine process %d still runs after its LocalMachine was deleted", earlyPID)
	}
	if _, err := os.Stat(earlyDir); !os.IsNotExist(err) {
		t.Errorf("machine directory left behind: %v", err)
	}

	deleteAndWaitGone(t, lc)
	if alive(lbPID) {
		t.Errorf("load balancer %d still runs", lbPID)
	}
	if entries, _ := os.ReadDir(root); len(entries) != 0 {
		t.Errorf("left in the provider's directory: %v", entries)
	}
}

func TestPausedClusterIsLeftAlone(t *testing.T) {
	ns := env.Namespace(t)
	root := providerRoot(t)
	startManager(t, ns, root)
	ctx := context.Background()
	c := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c3"}}
	c.Spec.Paused = ptr.To(true)
	c.Spec.InfrastructureRef = clusterv1.ContractVersionedObjectReference{APIGroup: localv1.GroupVersion.Group, Kind: "LocalCluster", Name: "c3"}
	if err := env.Client.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	lc := &localv1.LocalCluster{ObjectMeta: metav1.ObjectMeta{
		Namespace: ns, Name: "c3",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster", Name: c.Name, UID: c.UID, Controller: ptr.To(true)}},
	}}
	if err := env.Client.Create(ctx, lc); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, "paused", 30*time.Second, func(ctx context.Context) string {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(lc), lc); err != nil {
			return err.Error()
		}
		return fixture.Condition(lc.Status.Conditions, clusterv1.PausedCondition, metav1.ConditionTrue)
	})
	time.Sleep(500 * time.Millisecond)
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(lc), lc); err != nil {
		t.Fatal(err)
	}
	if lc.Spec.ControlPlaneEndpoint.Port != 0 || len(lc.Finalizers) != 0 {
		t.Fatalf("a paused LocalCluster was acted on: %+v, finalizers %v", lc.Spec, lc.Finalizers)
	}
	if _, err := os.Stat(filepath.Join(root, ns)); !os.IsNotExist(err) {
		t.Fatalf("a paused LocalCluster made its directory: %v", err)
	}
	// Unpausing the Cluster wakes the LocalCluster.
	if err := env.Client.Patch(ctx, c, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"paused":false}}`))); err != nil {
		t.Fatal(err)
	}
	waitClusterProvisioned(t, lc)
	deleteAndWaitGone(t, lc)
}
