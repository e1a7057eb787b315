package kubeadmconfig_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	bootstrapv1 "capstan.dev/capstan/api/bootstrap/kubeadm/v1beta2"
	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/certs"
	"capstan.dev/capstan/internal/controllers/kubeadmconfig"
	"capstan.dev/capstan/internal/kubeadm"
	"capstan.dev/capstan/internal/node/cloudinit"
	"capstan.dev/capstan/internal/testenv"
	"capstan.dev/capstan/internal/workload"
	"capstan.dev/capstan/test/fixture"
)

// mgmt is the management cluster; workloadEnv stands in for the workload
// cluster the bootstrap tokens go to.
var mgmt, workloadEnv *testenv.Env

// tokenTTL is short so that refreshes happen within a test.
const tokenTTL = 6 * time.Second

func TestMain(m *testing.M) {
	fixture.SetLogger()
	ctx, cancel := context.WithCancel(context.Background())
	code := func() int {
		p, stop, err := fixture.StartPlanes(ctx)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer stop()
		mgmt, workloadEnv = p.Mgmt, p.Workload
		mgr, err := ctrl.NewManager(mgmt.Config, ctrl.Options{
			Scheme:                 mgmt.Scheme,
			Metrics:                metricsserver.Options{BindAddress: "0"},
			HealthProbeBindAddress: "0",
			// As in Capstan's manager: Secrets and ConfigMaps are read live.
			Client: client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}, &corev1.ConfigMap{}}}},
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		cc, err := workload.New(mgr.GetClient(), workload.Options{Scheme: mgr.GetScheme()})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if err := mgr.Add(cc); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		r := &kubeadmconfig.Reconciler{Client: mgr.GetClient(), Workload: cc, Recorder: mgr.GetEventRecorder("kubeadmconfig"), TokenTTL: tokenTTL}
		if err := r.SetupWithManager(ctx, mgr, controller.Options{}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		go func() {
			if err := mgr.Start(ctx); err != nil {
				fmt.Fprintln(os.Stderr, "manager:", err)
			}
		}()
		return m.Run()
	}()
	cancel()
	os.Exit(code)
}

type clusterOpts struct {
	provisioned bool
	// workloadKubeconfig supplies <cluster>-kubeconfig reaching workloadEnv.
	workloadKubeconfig bool
	paused             bool
}

func createCluster(t *testing.T, ns string, o clusterOpts) *clusterv1.Cluster {
	t.Helper()
	c := fixture.NewCluster(ns, "c1", func(c *clusterv1.Cluster) {
		c.Spec.ControlPlaneEndpoint = clusterv1.APIEndpoint{Host: "127.0.0.1", Port: 40123}
		c.Spec.ClusterNetwork = clusterv1.ClusterNetwork{
			Pods: clusterv1.NetworkRanges{CIDRBlocks: []string{"192.168.0.0/16"}}, Services: clusterv1.NetworkRanges{CIDRBlocks: []string{"10.96.0.0/12"}},
			ServiceDomain: "cluster.local",
		}
		if o.paused {
			c.Spec.Paused = ptr.To(true)
		}
	})
	fixture.Create(t, mgmt.Client, c)
	if o.workloadKubeconfig {
		fixture.Create(t, mgmt.Client, fixture.KubeconfigSecret(t, workloadEnv, ns, "c1"))
	}
	if o.provisioned {
		setClusterStatus(t, c, `{"status":{"initialization":{"infrastructureProvisioned":true}}}`)
	}
	return c
}

func setClusterStatus(t *testing.T, c *clusterv1.Cluster, patch string) {
	t.Helper()
	if err := mgmt.Client.Status().Patch(context.Background(), c, client.RawPatch("application/merge-patch+json", []byte(patch))); err != nil {
		t.Fatal(err)
	}
}

// newMachine creates a KubeadmConfig and its Machine, and makes the Machine
// the config's controller, as the Machine controller would.
func newMachine(t *testing.T, c *clusterv1.Cluster, name string, controlPlane bool, spec bootstrapv1.KubeadmConfigSpec, mutate ...func(*clusterv1.Machine)) (*bootstrapv1.KubeadmConfig, *clusterv1.Machine) {
	t.Helper()
	ctx := context.Background()
	cfg := &bootstrapv1.KubeadmConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: name, Labels: map[string]string{clusterv1.ClusterNameLabel: c.Name}},
		Spec:       spec,
	}
	if err := mgmt.Client.Create(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	m := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: name, Labels: map[string]string{clusterv1.ClusterNameLabel: c.Name}},
		Spec: clusterv1.MachineSpec{
			ClusterName: c.Name,
			Version:     "v1.34.2",
			Bootstrap: clusterv1.Bootstrap{ConfigRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: bootstrapv1.GroupVersion.Group, Kind: "KubeadmConfig", Name: name,
			}},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.example.com", Kind: "TestMachine", Name: name},
		},
	}
	if controlPlane {
		m.Labels[clusterv1.MachineControlPlaneLabel] = ""
	}
	for _, f := range mutate {
		f(m)
	}
	if err := mgmt.Client.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	before := cfg.DeepCopy()
	cfg.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: clusterv1.GroupVersion.String(), Kind: "Machine", Name: m.Name, UID: m.UID, Controller: ptr.To(true),
	}}
	if err := mgmt.Client.Patch(ctx, cfg, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	return cfg, m
}

func initSpec() bootstrapv1.KubeadmConfigSpec {
	return bootstrapv1.KubeadmConfigSpec{
		InitConfiguration:  bootstrapv1.InitConfiguration{NodeRegistration: bootstrapv1.NodeRegistrationOptions{Name: "{{ ds.meta_data.local_hostname }}"}},
		PreKubeadmCommands: []string{"echo pre"},
	}
}

func joinSpec() bootstrapv1.KubeadmConfigSpec {
	return bootstrapv1.KubeadmConfigSpec{
		JoinConfiguration: bootstrapv1.JoinConfiguration{NodeRegistration: bootstrapv1.NodeRegistrationOptions{Name: "{{ ds.meta_data.local_hostname }}"}},
	}
}

func getConfig(ctx context.Context, cfg *bootstrapv1.KubeadmConfig) error {
	return mgmt.Client.Get(ctx, client.ObjectKeyFromObject(cfg), cfg)
}

func condition(cfg *bootstrapv1.KubeadmConfig, t string) *metav1.Condition {
	return meta.FindStatusCondition(cfg.Status.Conditions, t)
}

// waitData waits for the config's data secret and returns it parsed.
func waitData(t *testing.T, cfg *bootstrapv1.KubeadmConfig) (*corev1.Secret, *cloudinit.Config) {
	t.Helper()
	fixture.Eventually(t, "data secret of "+cfg.Name, 30*time.Second, func(ctx context.Context) string {
		if err := getConfig(ctx, cfg); err != nil {
			return err.Error()
		}
		if cfg.Status.DataSecretName == "" || !ptr.Deref(cfg.Status.Initialization.DataSecretCreated, false) {
			return fmt.Sprintf("no data secret yet: %+v", cfg.Status.Conditions)
		}
		if c := condition(cfg, bootstrapv1.ReadyCondition); c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Sprintf("not Ready: %+v", c)
		}
		return ""
	})
	s := &corev1.Secret{}
	if err := mgmt.Client.Get(context.Background(), client.ObjectKey{Namespace: cfg.Namespace, Name: cfg.Status.DataSecretName}, s); err != nil {
		t.Fatal(err)
	}
	if s.Type != certs.ClusterSecretType || string(s.Data["format"]) != "cloud-config" || s.Labels[clusterv1.ClusterNameLabel] != "c1" {
		t.Errorf("data secret: type %q format %q labels %v", s.Type, s.Data["format"], s.Labels)
	}
	if len(s.OwnerReferences) != 1 || s.OwnerReferences[0].UID != cfg.UID || !ptr.Deref(s.OwnerReferences[0].Controller, false) {
		t.Errorf("data secret owners %+v", s.OwnerReferences)
	}
	if cfg.Status.ObservedGeneration != cfg.Generation {
		t.Errorf("observedGeneration %d, generation %d", cfg.Status.ObservedGeneration, cfg.Generation)
	}
	parsed, err := cloudinit.Parse(s.Data["value"])
	if err != nil {
		t.Fatalf("bootstrap data does not parse: %v\n%s", err, s.Data["value"])
	}
	return s, parsed
}

func files(c *cloudinit.Config) map[string]cloudinit.File {
	out := map[string]cloudinit.File{}
	for _, f := range c.WriteFiles {
		out[f.Path] = f
	}
	return out
}

func runcmd(c *cloudinit.Config) []string {
	var out []string
	for _, cmd := range c.RunCmd {
		out = append(out, cmd.String())
	}
	return out
}

var pkiFiles = []string{"ca.crt", "ca.key", "etcd/ca.crt", "etcd/ca.key", "front-proxy-ca.crt", "front-proxy-ca.key", "sa.pub", "sa.key"}

func TestInitControlPlane(t *testing.T) {
	ns := mgmt.Namespace(t)
	c := createCluster(t, ns, clusterOpts{provisioned: true})
	cfg, _ := newMachine(t, c, "cp-0", true, initSpec())

	_, data := waitData(t, cfg)
	fs := files(data)
	for _, name := range pkiFiles {
		f, ok := fs["/etc/kubernetes/pki/"+name]
		if !ok {
			t.Errorf("missing %s", name)
			continue
		}
		if want := map[bool]uint32{true: 0o600, false: 0o640}[strings.HasSuffix(name, ".key")]; uint32(f.Mode) != want {
			t.Errorf("%s mode %o", name, f.Mode)
		}
	}
	kf, ok := fs[kubeadmconfig.InitConfigPath]
	if !ok {
		t.Fatalf("no kubeadm file; files %v", fs)
	}
	docs, err := kubeadm.Parse([]byte(kf.Content))
	if err != nil {
		t.Fatal(err)
	}
	if docs.Cluster == nil || docs.Init == nil || docs.Cluster.ClusterName != "c1" || docs.Cluster.ControlPlaneEndpoint != "127.0.0.1:40123" ||
		docs.Cluster.KubernetesVersion != "v1.34.2" || docs.Cluster.Networking.PodSubnet != "192.168.0.0/16" {
		t.Errorf("kubeadm init file:\n%s", kf.Content)
	}
	if !strings.Contains(kf.Content, "apiVersion: kubeadm.k8s.io/v1beta4") {
		t.Errorf("v1.34 takes v1beta4:\n%s", kf.Content)
	}
	if run := runcmd(data); len(run) != 2 || run[0] != "echo pre" || run[1] != "kubeadm init --config /run/kubeadm/kubeadm.yaml && echo success > /run/cluster-api/bootstrap-success.complete" {
		t.Errorf("runcmd %q", run)
	}

	ctx := context.Background()
	stored, err := certs.Lookup(ctx, mgmt.Client, client.ObjectKeyFromObject(c))
	if err != nil {
		t.Fatalf("cluster certificates: %v", err)
	}
	if fs["/etc/kubernetes/pki/ca.crt"].Content != string(stored.CA.CertPEM()) {
		t.Error("ca.crt is not the stored cluster CA")
	}
	lock := &corev1.ConfigMap{}
	if err := mgmt.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "c1-lock"}, lock); err != nil || !strings.Contains(lock.Data["lock-information"], `"cp-0"`) {
		t.Errorf("init lock: %v %v", err, lock.Data)
	}
	// A control plane of bare Machines gets its admin kubeconfig here.
	kc := &corev1.Secret{}
	if err := mgmt.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "c1-kubeconfig"}, kc); err != nil || !strings.Contains(string(kc.Data["value"]), "https://127.0.0.1:40123") {
		t.Errorf("kubeconfig: %v", err)
	}
}

func TestOnlyOneControlPlaneMachineInits(t *testing.T) {
	ctx := context.Background()
	ns := mgmt.Namespace(t)
	c := createCluster(t, ns, clusterOpts{workloadKubeconfig: true})
	a, _ := newMachine(t, c, "cp-a", true, initSpec())
	b, _ := newMachine(t, c, "cp-b", true, initSpec())
	// Shaped like KubeadmControlPlane's later Machines: join only, with the
	// cluster-wide settings kept.
	joinOnly := joinSpec()
	joinOnly.JoinConfiguration.ControlPlane = &bootstrapv1.JoinControlPlane{}
	joinOnly.ClusterConfiguration.CertificatesDir = "/etc/kubernetes/pki"
	j, _ := newMachine(t, c, "cp-join", true, joinOnly)
	setClusterStatus(t, c, `{"status":{"initialization":{"infrastructureProvisioned":true}}}`)

	var winner, loser *bootstrapv1.KubeadmConfig
	fixture.Eventually(t, "one init, one waiting", 30*time.Second, func(ctx context.Context) string {
		for _, cfg := range []*bootstrapv1.KubeadmConfig{a, b} {
			if err := getConfig(ctx, cfg); err != nil {
				return err.Error()
			}
		}
		switch {
		case a.Status.DataSecretName != "" && b.Status.DataSecretName != "":
			return "both machines got init data"
		case a.Status.DataSecretName != "":
			winner, loser = a, b
		case b.Status.DataSecretName != "":
			winner, loser = b, a
		default:
			return "no machine got data yet"
		}
		cond := condition(loser, bootstrapv1.DataSecretAvailableCondition)
		if cond == nil || cond.Reason != kubeadmconfig.WaitingForInitLockReason || !strings.Contains(cond.Message, winner.Name) {
			return fmt.Sprintf("loser condition %+v", cond)
		}
		return ""
	})
	_, data := waitData(t, winner)
	if _, ok := files(data)[kubeadmconfig.InitConfigPath]; !ok {
		t.Fatal("the winner must init")
	}
	// The loser keeps waiting while the control plane is not initialized.
	time.Sleep(time.Second)
	if err := getConfig(ctx, loser); err != nil || loser.Status.DataSecretName != "" {
		t.Fatalf("the loser must not get data before initialization: %v %q", err, loser.Status.DataSecretName)
	}

	if err := getConfig(ctx, j); err != nil {
		t.Fatal(err)
	}
	if cond := condition(j, bootstrapv1.DataSecretAvailableCondition); j.Status.DataSecretName != "" || cond == nil || cond.Reason != kubeadmconfig.WaitingForControlPlaneInitializationReason {
		t.Fatalf("a join-only control plane config must wait for initialization: %q %+v", j.Status.DataSecretName, cond)
	}

	// Initialized: the loser joins as a control plane machine.
	setClusterStatus(t, c, `{"status":{"initialization":{"controlPlaneInitialized":true}}}`)
	_, data = waitData(t, loser)
	fs := files(data)
	jf, ok := fs[kubeadmconfig.JoinConfigPath]
	if !ok {
		t.Fatalf("the second machine must join; files %v", fs)
	}
	docs, err := kubeadm.Parse([]byte(jf.Content))
	if err != nil {
		t.Fatal(err)
	}
	if docs.Join == nil || docs.Join.ControlPlane == nil {
		t.Errorf("a control plane join needs controlPlane:\n%s", jf.Content)
	}
	for _, name := range pkiFiles {
		if _, ok := fs["/etc/kubernetes/pki/"+name]; !ok {
			t.Errorf("control plane join without %s", name)
		}
	}
	if run := runcmd(data); run[len(run)-1] != "kubeadm join --config /run/kubeadm/kubeadm-join-config.yaml && echo success > /run/cluster-api/bootstrap-success.complete" {
		t.Errorf("runcmd %q", run)
	}
	_, data = waitData(t, j)
	if _, ok := files(data)[kubeadmconfig.JoinConfigPath]; !ok {
		t.Error("the join-only machine must join")
	}
	fixture.Eventually(t, "lock released", 30*time.Second, func(ctx context.Context) string {
		err := mgmt.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "c1-lock"}, &corev1.ConfigMap{})
		if apierrors.IsNotFound(err) {
			return ""
		}
		return fmt.Sprintf("lock still there: %v", err)
	})
}

func TestInitLockOfDeletedMachineIsTakenOver(t *testing.T) {
	ctx := context.Background()
	ns := mgmt.Namespace(t)
	c := createCluster(t, ns, clusterOpts{provisioned: true})
	stale := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c1-lock"},
		Data:       map[string]string{"lock-information": `{"machineName":"gone"}`},
	}
	if err := mgmt.Client.Create(ctx, stale); err != nil {
		t.Fatal(err)
	}
	cfg, _ := newMachine(t, c, "cp-0", true, initSpec())
	waitData(t, cfg)
}

// A KubeadmControlPlane makes one first Machine and waits for it, so its
// Machines init without the lock (and without its two writes).
func TestControlPlaneOwnedMachineInitsWithoutLock(t *testing.T) {
	ns := mgmt.Namespace(t)
	c := createCluster(t, ns, clusterOpts{provisioned: true})
	// No control plane controller runs here: the object only has to exist,
	// or the garbage collector would take the Machine it owns.
	kcp := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "controlplane.cluster.x-k8s.io/v1beta2", "kind": "KubeadmControlPlane",
		"metadata": map[string]any{"namespace": ns, "name": "cp"},
		"spec": map[string]any{"version": "v1.34.2", "machineTemplate": map[string]any{"spec": map[string]any{
			"infrastructureRef": map[string]any{"apiGroup": "infrastructure.example.com", "kind": "TestMachineTemplate", "name": "cp"},
		}}},
	}}
	if err := mgmt.Client.Create(context.Background(), kcp); err != nil {
		t.Fatal(err)
	}
	cfg, _ := newMachine(t, c, "cp-0", true, initSpec(), func(m *clusterv1.Machine) {
		m.OwnerReferences = []metav1.OwnerReference{{
			APIVersion: kcp.GetAPIVersion(), Kind: kcp.GetKind(), Name: kcp.GetName(), UID: kcp.GetUID(), Controller: ptr.To(true),
		}}
	})
	_, data := waitData(t, cfg)
	if _, ok := files(data)[kubeadmconfig.InitConfigPath]; !ok {
		t.Error("the control plane's first Machine must init")
	}
	err := mgmt.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "c1-lock"}, &corev1.ConfigMap{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("a KubeadmControlPlane's Machine took the init lock (get: %v)", err)
	}
}

func TestWorkerWaitsThenJoinsWithToken(t *testing.T) {
	ctx := context.Background()
	ns := mgmt.Namespace(t)
	// The user brings the cluster CA; it must be the one pinned.
	userCA, err := certs.NewCA("my-ca", certs.DefaultKeyAlgorithm, time.Now(), 365*24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	key, _ := userCA.KeyPEM()
	if err := mgmt.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c1-ca"}, Data: map[string][]byte{"tls.crt": userCA.CertPEM(), "tls.key": key},
	}); err != nil {
		t.Fatal(err)
	}
	c := createCluster(t, ns, clusterOpts{provisioned: true, workloadKubeconfig: true})
	cfg, m := newMachine(t, c, "md-0", false, joinSpec())

	fixture.Eventually(t, "worker waits for initialization", 30*time.Second, func(ctx context.Context) string {
		if err := getConfig(ctx, cfg); err != nil {
			return err.Error()
		}
		cond := condition(cfg, bootstrapv1.DataSecretAvailableCondition)
		if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != kubeadmconfig.WaitingForControlPlaneInitializationReason {
			return fmt.Sprintf("condition %+v", cond)
		}
		if ready := condition(cfg, bootstrapv1.ReadyCondition); ready == nil || ready.Status != metav1.ConditionFalse {
			return fmt.Sprintf("Ready %+v", ready)
		}
		return ""
	})
	if err := mgmt.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "md-0"}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Fatalf("no data secret before initialization: %v", err)
	}

	// The other CAs come from the (here simulated) init.
	if _, err := certs.LookupOrGenerate(ctx, mgmt.Client, client.ObjectKeyFromObject(c),
		metav1.OwnerReference{APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster", Name: c.Name, UID: c.UID}); err != nil {
		t.Fatal(err)
	}
	setClusterStatus(t, c, `{"status":{"initialization":{"controlPlaneInitialized":true}}}`)
	dataSecret, data := waitData(t, cfg)
	fs := files(data)
	for _, name := range pkiFiles {
		if _, ok := fs["/etc/kubernetes/pki/"+name]; ok {
			t.Errorf("a worker must not get %s", name)
		}
	}
	docs, err := kubeadm.Parse([]byte(fs[kubeadmconfig.JoinConfigPath].Content))
	if err != nil {
		t.Fatal(err)
	}
	bt := docs.Join.Discovery.BootstrapToken
	if bt == nil || bt.APIServerEndpoint != "127.0.0.1:40123" || len(bt.CACertHashes) != 1 || bt.CACertHashes[0] != certs.PublicKeyPin(userCA.Cert) {
		t.Fatalf("discovery %+v", bt)
	}
	if docs.Join.ControlPlane != nil {
		t.Error("a worker join has no controlPlane")
	}
	// The generated token is kept with the data, not written into the spec.
	if err := getConfig(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Spec.JoinConfiguration.Discovery.BootstrapToken.Token != "" || cfg.Generation != 1 {
		t.Errorf("the spec was written (generation %d, token %q)", cfg.Generation, cfg.Spec.JoinConfiguration.Discovery.BootstrapToken.Token)
	}
	if string(dataSecret.Data["bootstrap-token"]) != bt.Token {
		t.Errorf("data secret keeps token %q, the join file has %q", dataSecret.Data["bootstrap-token"], bt.Token)
	}
	id, secret, _ := strings.Cut(bt.Token, ".")
	tokenKey := client.ObjectKey{Namespace: "kube-system", Name: "bootstrap-token-" + id}
	ts := &corev1.Secret{}
	if err := workloadEnv.Client.Get(ctx, tokenKey, ts); err != nil {
		t.Fatalf("token secret in the workload cluster: %v", err)
	}
	if ts.Type != "bootstrap.kubernetes.io/token" || string(ts.Data["token-secret"]) != secret || string(ts.Data["token-id"]) != id ||
		string(ts.Data["usage-bootstrap-authentication"]) != "true" || string(ts.Data["usage-bootstrap-signing"]) != "true" ||
		string(ts.Data["auth-extra-groups"]) != "system:bootstrappers:kubeadm:default-node-token" || !strings.Contains(string(ts.Data["description"]), "md-0") {
		t.Errorf("token secret %s: %v", ts.Type, ts.Data)
	}
	expiration := func() time.Time {
		s := &corev1.Secret{}
		if err := workloadEnv.Client.Get(ctx, tokenKey, s); err != nil {
			t.Fatal(err)
		}
		e, err := time.Parse(time.RFC3339, string(s.Data["expiration"]))
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	first := expiration()
	if d := time.Until(first); d > tokenTTL+time.Second || d < 0 {
		t.Errorf("expiration %s is not one TTL ahead", first)
	}

	// No Node yet: the token is kept alive.
	fixture.Eventually(t, "token extended", 30*time.Second, func(context.Context) string {
		if e := expiration(); !e.After(first) {
			return "expiration still " + e.String()
		}
		return ""
	})
	// Gone before the join: it comes back, same token.
	if err := workloadEnv.Client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: tokenKey.Namespace, Name: tokenKey.Name}}); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, "token re-created", 30*time.Second, func(ctx context.Context) string {
		s := &corev1.Secret{}
		if err := workloadEnv.Client.Get(ctx, tokenKey, s); err != nil {
			return err.Error()
		}
		if string(s.Data["token-secret"]) != secret {
			return "another token"
		}
		return ""
	})

	// The Node exists: the token is left to expire.
	if err := mgmt.Client.Status().Patch(ctx, m, client.RawPatch("application/merge-patch+json", []byte(`{"status":{"nodeRef":{"name":"md-0"}}}`))); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // let the Machine event land
	last := expiration()
	time.Sleep(tokenTTL)
	if e := expiration(); !e.Equal(last) {
		t.Errorf("token extended after the Node appeared: %s -> %s", last, e)
	}
	// The data secret was written once.
	if err := getConfig(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if raw, _ := json.Marshal(cfg.Status.Conditions); !strings.Contains(string(raw), `"DataSecretAvailable"`) {
		t.Errorf("conditions %s", raw)
	}
}

func TestPauseHonoured(t *testing.T) {
	ctx := context.Background()
	ns := mgmt.Namespace(t)
	c := createCluster(t, ns, clusterOpts{provisioned: true, paused: true})
	cfg, _ := newMachine(t, c, "cp-0", true, initSpec())
	fixture.Eventually(t, "paused", 30*time.Second, func(ctx context.Context) string {
		if err := getConfig(ctx, cfg); err != nil {
			return err.Error()
		}
		if p := condition(cfg, bootstrapv1.PausedCondition); p == nil || p.Status != metav1.ConditionTrue {
			return fmt.Sprintf("Paused %+v", p)
		}
		return ""
	})
	time.Sleep(time.Second)
	if err := getConfig(ctx, cfg); err != nil || cfg.Status.DataSecretName != "" {
		t.Fatalf("a paused config must not get data: %v %q", err, cfg.Status.DataSecretName)
	}
	if err := mgmt.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "c1-ca"}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Errorf("a paused cluster must not get certificates: %v", err)
	}
	if err := mgmt.Client.Patch(ctx, c, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"paused":false}}`))); err != nil {
		t.Fatal(err)
	}
	waitData(t, cfg)
	if p := condition(cfg, bootstrapv1.PausedCondition); p == nil || p.Status != metav1.ConditionFalse {
		t.Errorf("Paused after unpause: %+v", p)
	}
}

// A config that has its data still reports its Cluster's pause and its
// end: a move waits for every object of the cluster to say it stopped.
func TestConfigWithDataReportsPause(t *testing.T) {
	ctx := context.Background()
	ns := mgmt.Namespace(t)
	c := createCluster(t, ns, clusterOpts{provisioned: true})
	cfg, _ := newMachine(t, c, "cp-0", true, initSpec())
	waitData(t, cfg)
	for _, paused := range []bool{true, false} {
		patch := fmt.Sprintf(`{"spec":{"paused":%t}}`, paused)
		if err := mgmt.Client.Patch(ctx, c, client.RawPatch("application/merge-patch+json", []byte(patch))); err != nil {
			t.Fatal(err)
		}
		want := metav1.ConditionFalse
		if paused {
			want = metav1.ConditionTrue
		}
		fixture.Eventually(t, "Paused "+string(want), 30*time.Second, func(ctx context.Context) string {
			if err := getConfig(ctx, cfg); err != nil {
				return err.Error()
			}
			if p := condition(cfg, bootstrapv1.PausedCondition); p == nil || p.Status != want {
				return fmt.Sprintf("Paused %+v", p)
			}
			return ""
		})
	}
}

func TestFilesFromSecretsAndMissingSecret(t *testing.T) {
	ctx := context.Background()
	ns := mgmt.Namespace(t)
	c := createCluster(t, ns, clusterOpts{provisioned: true})
	spec := initSpec()
	spec.Files = []bootstrapv1.File{{Path: "/etc/extra.conf", ContentFrom: bootstrapv1.FileSource{Secret: bootstrapv1.SecretFileSource{Name: "extra", Key: "conf"}}}}
	cfg, _ := newMachine(t, c, "cp-0", true, spec)
	fixture.Eventually(t, "missing secret reported", 30*time.Second, func(ctx context.Context) string {
		if err := getConfig(ctx, cfg); err != nil {
			return err.Error()
		}
		cond := condition(cfg, bootstrapv1.DataSecretAvailableCondition)
		if cond == nil || cond.Reason != kubeadmconfig.InvalidConfigReason || !strings.Contains(cond.Message, "spec.files[0].contentFrom") || !strings.Contains(cond.Message, "extra") {
			return fmt.Sprintf("condition %+v", cond)
		}
		return ""
	})
	if err := mgmt.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "extra"}, Data: map[string][]byte{"conf": []byte("x=1\n")}}); err != nil {
		t.Fatal(err)
	}
	// A change of the config wakes it at once instead of after the slow retry.
	if err := mgmt.Client.Patch(ctx, cfg, client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"annotations":{"touch":"1"}}}`))); err != nil {
		t.Fatal(err)
	}
	_, data := waitData(t, cfg)
	if f := files(data)["/etc/extra.conf"]; f.Content != "x=1\n" {
		t.Errorf("file from secret: %+v", f)
	}
}
