package qemu_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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
	qemuv1 "capstan.dev/capstan/api/infrastructure/qemu/v1beta2"
	"capstan.dev/capstan/internal/lockfile"
	"capstan.dev/capstan/internal/providers/local"
	"capstan.dev/capstan/internal/providers/qemu"
	"capstan.dev/capstan/internal/providers/qemu/image"
	"capstan.dev/capstan/internal/scheme"
	"capstan.dev/capstan/internal/testenv"
	"capstan.dev/capstan/test/fixture"
)

var (
	env *testenv.Env
	// lbBinary stands in for capstan as `node lb`: the local provider's
	// test binary, which runs the real load balancer.
	lbBinary string
)

func TestMain(m *testing.M) {
	if os.Getenv("CAPSTAN_TEST_LOGS") != "" {
		ctrl.SetLogger(zap.New(zap.UseDevMode(true)))
	} else {
		ctrl.SetLogger(zap.New(zap.WriteTo(io.Discard)))
	}
	code := func() int {
		dir, err := os.MkdirTemp("", "capstan-qemu-test-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		lbBinary = filepath.Join(dir, "fakenode")
		if out, err := exec.Command("go", "build", "-o", lbBinary, "../local/testdata/fakenode").CombinedOutput(); err != nil {
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

// imageBuild is a guest image build the test drives: it reports a step,
// then waits for the test to end it with an error.
type imageBuild struct{ end chan error }

func (b *imageBuild) ensure(ctx context.Context, o image.NodeOptions) (image.Image, error) {
	o.Progress("installing packages")
	select {
	case err := <-b.end:
		return image.Image{}, err
	case <-ctx.Done():
		return image.Image{}, ctx.Err()
	}
}

// startManager runs the QEMU provider's controllers only (the test plays
// the core's part) until stop is called or the test ends.
func startManager(t *testing.T, ns, root string, build *imageBuild) (stop func()) {
	t.Helper()
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:                 scheme.New(),
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}},
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	o := qemu.Options{Dir: root, Binary: lbBinary, BuildImage: build.ensure}
	if err := qemu.Setup(ctx, mgr, o); err != nil {
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

func alive(pid int32) bool { return pid > 0 && syscall.Kill(int(pid), 0) == nil }

// waitFor polls obj until check says nothing is missing.
func waitFor[T client.Object](t *testing.T, what string, obj T, check func(T) string) {
	t.Helper()
	fixture.Eventually(t, what, 30*time.Second, func(ctx context.Context) string {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return err.Error()
		}
		return check(obj)
	})
}

// vmCondition is the "why not yet" of a QEMUMachine whose VMProvisioned
// condition should have reason and a message containing msg.
func vmCondition(qm *qemuv1.QEMUMachine, reason, msg string) string {
	c := meta.FindStatusCondition(qm.Status.Conditions, qemuv1.VMProvisionedCondition)
	if c == nil || c.Reason != reason || !strings.Contains(c.Message, msg) {
		return fmt.Sprintf("want VMProvisioned %s %q, have %+v", reason, msg, c)
	}
	if r := meta.FindStatusCondition(qm.Status.Conditions, qemuv1.ReadyCondition); r == nil || r.Status != metav1.ConditionFalse {
		return fmt.Sprintf("want Ready False, have %+v", r)
	}
	return ""
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

// TestQEMUProviderWithoutAGuest runs what needs no booted guest, in one
// plane and one cluster: the endpoint's load balancer, a control-plane
// machine waiting for its bootstrap data, its host ports kept across a
// manager restart, the image build reported, and deletion leaving no
// process, backend or directory behind.
func TestQEMUProviderWithoutAGuest(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	root := t.TempDir()
	t.Cleanup(func() {
		// A failed test may leave its load balancer running.
		locks, _ := filepath.Glob(filepath.Join(root, "_lb", "*", "*", "lb.lock"))
		for _, l := range locks {
			if pid, _ := lockfile.Holder(l); pid > 0 {
				t.Errorf("process %d still holds %s at the end of the test", pid, l)
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	build := &imageBuild{end: make(chan error, 1)}
	whole := t // the manager restarted in a subtest lives on after it
	stop := startManager(t, ns, root, build)

	c := fixture.NewCluster(ns, "vms", fixture.Infrastructure(&qemuv1.QEMUCluster{ObjectMeta: metav1.ObjectMeta{Name: "vms"}}))
	fixture.Create(t, env.Client, c)
	qc := &qemuv1.QEMUCluster{ObjectMeta: metav1.ObjectMeta{
		Namespace: ns, Name: "vms",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster", Name: c.Name, UID: c.UID, Controller: ptr.To(true)}},
	}}
	qc.Spec.FailureDomains = []clusterv1.FailureDomain{{Name: "fd1", ControlPlane: ptr.To(true)}}
	fixture.Create(t, env.Client, qc)
	lbDir := filepath.Join(root, "_lb", ns, "vms")
	backends := filepath.Join(lbDir, "backends")

	t.Run("the endpoint is a load balancer on a free loopback port", func(t *testing.T) {
		waitFor(t, "QEMUCluster provisioned", qc, func(qc *qemuv1.QEMUCluster) string {
			if !ptr.Deref(qc.Status.Initialization.Provisioned, false) {
				return fmt.Sprintf("not provisioned: %+v", qc.Status)
			}
			return fixture.Condition(qc.Status.Conditions, qemuv1.ReadyCondition, metav1.ConditionTrue)
		})
		ep := qc.Spec.ControlPlaneEndpoint
		if ep.Host != "127.0.0.1" || ep.Port == 0 || ep.Port == 6443 {
			t.Fatalf("controlPlaneEndpoint = %+v, want 127.0.0.1 and a free port other than a guest's", ep)
		}
		conn, err := net.DialTimeout("tcp", ep.String(), time.Second)
		if err != nil {
			t.Fatalf("the load balancer does not answer on %s: %v", ep, err)
		}
		conn.Close()
		if !alive(qc.Status.LoadBalancer.PID) || qc.Status.LoadBalancer.Dir != lbDir {
			t.Errorf("status.loadBalancer = %+v, want a live process in %s", qc.Status.LoadBalancer, lbDir)
		}
		if len(qc.Status.FailureDomains) != 1 || qc.Status.FailureDomains[0].Name != "fd1" {
			t.Errorf("status.failureDomains = %+v, want spec's", qc.Status.FailureDomains)
		}
	})

	m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "vms-cp-1", Labels: map[string]string{clusterv1.MachineControlPlaneLabel: ""}}}
	m.Spec.ClusterName = "vms"
	m.Spec.Version = "v1.34.2"
	m.Spec.InfrastructureRef = clusterv1.ContractVersionedObjectReference{APIGroup: qemuv1.GroupVersion.Group, Kind: "QEMUMachine", Name: m.Name}
	// The bootstrap provider (not running here) would fill in the data.
	m.Spec.Bootstrap.ConfigRef = clusterv1.ContractVersionedObjectReference{APIGroup: "bootstrap.cluster.x-k8s.io", Kind: "KubeadmConfig", Name: m.Name}
	fixture.Create(t, env.Client, m)
	qm := &qemuv1.QEMUMachine{ObjectMeta: metav1.ObjectMeta{
		Namespace: ns, Name: m.Name, Labels: map[string]string{clusterv1.ClusterNameLabel: "vms"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Machine", Name: m.Name, UID: m.UID, Controller: ptr.To(true)}},
	}}
	fixture.Create(t, env.Client, qm)

	t.Run("a machine waits for its bootstrap data and says so", func(t *testing.T) {
		waitFor(t, "waiting for dataSecretName", qm, func(qm *qemuv1.QEMUMachine) string {
			return vmCondition(qm, qemuv1.WaitingForBootstrapReason, "spec.bootstrap.dataSecretName")
		})
		if qm.Spec.ProviderID != "qemu://"+ns+"/vms-cp-1" || !slices.Contains(qm.Finalizers, qemuv1.QEMUMachineFinalizer) {
			t.Errorf("providerID %q, finalizers %v", qm.Spec.ProviderID, qm.Finalizers)
		}
		if qm.Spec.CPUs != 2 || qm.Spec.MemoryMiB != 2048 {
			t.Errorf("size %d CPUs %d MiB, want the defaults 2 and 2048", qm.Spec.CPUs, qm.Spec.MemoryMiB)
		}
		if qm.Status.Ports != (qemuv1.QEMUMachinePorts{}) || ptr.Deref(qm.Status.Initialization.Provisioned, false) {
			t.Errorf("ports %+v chosen or provisioned before the bootstrap data", qm.Status.Ports)
		}
		m.Spec.Bootstrap.DataSecretName = ptr.To("vms-cp-1-bootstrap")
		if err := env.Client.Update(ctx, m); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "waiting for the Secret", qm, func(qm *qemuv1.QEMUMachine) string {
			return vmCondition(qm, qemuv1.WaitingForBootstrapReason, "vms-cp-1-bootstrap does not exist yet")
		})
	})

	var ports qemuv1.QEMUMachinePorts
	t.Run("host ports are chosen once and kept across a restart", func(t *testing.T) {
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "vms-cp-1-bootstrap", Labels: map[string]string{clusterv1.ClusterNameLabel: "vms"}},
			Data: map[string][]byte{"value": []byte("#cloud-config\n")}}
		fixture.Create(t, env.Client, secret)
		waitFor(t, "building the image", qm, func(qm *qemuv1.QEMUMachine) string {
			return vmCondition(qm, qemuv1.BuildingImageReason, "building the node image of Kubernetes v1.34.2: installing packages")
		})
		ports = qm.Status.Ports
		if qm.Status.NetworkAddress != "172.31.0.2" {
			t.Errorf("status.networkAddress = %q, want the segment's first host address 172.31.0.2", qm.Status.NetworkAddress)
		}
		lbPort := qc.Spec.ControlPlaneEndpoint.Port
		if ports.SSH == 0 || ports.APIServer == 0 || ports.SSH == ports.APIServer || ports.SSH == lbPort || ports.APIServer == lbPort {
			t.Fatalf("status.ports = %+v (endpoint %d): want two distinct ports of their own for a control-plane machine", ports, lbPort)
		}
		stop()
		stop = startManager(whole, ns, root, build)
		fixture.Consistently(t, "ports kept after the restart", 2*time.Second, func(ctx context.Context) string {
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(qm), qm); err != nil {
				return err.Error()
			}
			if qm.Status.Ports != ports || qm.Status.NetworkAddress != "172.31.0.2" {
				return fmt.Sprintf("ports %+v, were %+v; address %q", qm.Status.Ports, ports, qm.Status.NetworkAddress)
			}
			return ""
		})
	})

	t.Run("a failed image build is reported", func(t *testing.T) {
		build.end <- errors.New("debootstrap failed")
		waitFor(t, "image failure", qm, func(qm *qemuv1.QEMUMachine) string {
			return vmCondition(qm, qemuv1.ImageFailedReason, "debootstrap failed")
		})
		if ptr.Deref(qm.Status.Initialization.Provisioned, false) {
			t.Error("provisioned without a VM")
		}
	})

	t.Run("deletion leaves no backend, directory or process behind", func(t *testing.T) {
		// A backend as a control-plane machine registers once its VM runs.
		if err := local.SetBackend(backends, qm.Name, fmt.Sprintf("127.0.0.1:%d", ports.APIServer)); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(root, ns, qm.Name), 0o700); err != nil {
			t.Fatal(err)
		}
		deleteAndWaitGone(t, qm)
		for _, p := range []string{filepath.Join(backends, qm.Name), filepath.Join(root, ns, qm.Name)} {
			if _, err := os.Stat(p); !os.IsNotExist(err) {
				t.Errorf("%s left behind (%v)", p, err)
			}
		}
		pid, ep := qc.Status.LoadBalancer.PID, qc.Spec.ControlPlaneEndpoint
		sockets, err := qemu.SocketRoot()
		if err != nil {
			t.Fatal(err)
		}
		netDir := qemu.NetworkDir(sockets, lbDir)
		if _, err := os.Stat(netDir); err != nil {
			t.Errorf("the cluster's network directory: %v", err)
		}
		deleteAndWaitGone(t, qc)
		if _, err := os.Stat(netDir); !os.IsNotExist(err) {
			t.Errorf("network directory %s left behind: %v", netDir, err)
		}
		if alive(pid) {
			t.Errorf("load balancer %d still runs after its QEMUCluster was deleted", pid)
		}
		if _, err := os.Stat(lbDir); !os.IsNotExist(err) {
			t.Errorf("load balancer directory left behind: %v", err)
		}
		if c, err := net.DialTimeout("tcp", ep.String(), time.Second); err == nil {
			c.Close()
			t.Errorf("something still listens on %s", ep)
		}
	})
}
