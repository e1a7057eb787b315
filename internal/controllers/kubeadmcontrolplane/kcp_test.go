package kubeadmcontrolplane_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bootstrapv1 "capstan.dev/capstan/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "capstan.dev/capstan/api/controlplane/kubeadm/v1beta2"
	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/certs"
	"capstan.dev/capstan/internal/conditions"
	"capstan.dev/capstan/internal/contract"
	"capstan.dev/capstan/internal/controllers/kubeadmcontrolplane"
	"capstan.dev/capstan/internal/manager"
	"capstan.dev/capstan/internal/node/kubelet"
	"capstan.dev/capstan/test/fixture"
	"capstan.dev/capstan/test/provider"
)

var planes *fixture.Planes

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
		planes = p
		if _, err := p.StartManager(ctx, manager.Options{}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return m.Run()
	}()
	cancel()
	os.Exit(code)
}

// createCluster makes a Cluster whose control plane is a
// KubeadmControlPlane of the given size on the test provider, with the
// workload plane as its workload cluster and the workload plane's own CA as
// the cluster's etcd CA (a user-supplied secret), so the controller can talk
// to a real etcd.
func createCluster(t *testing.T, ns string, replicas int32) *controlplanev1.KubeadmControlPlane {
	t.Helper()
	return createClusterWith(t, ns, replicas, fixture.KubeconfigSecret(t, planes.Workload, ns, "c"))
}

// createClusterWith is createCluster with the given kubeconfig Secret.
func createClusterWith(t *testing.T, ns string, replicas int32, kubeconfig *corev1.Secret) *controlplanev1.KubeadmControlPlane {
	t.Helper()
	ctx := context.Background()
	c := planes.Mgmt.Client
	// The cluster's etcd CA is the workload plane's: its etcd trusts no other.
	pki := filepath.Join(planes.Workload.StateDir, "pki", "etcd")
	caCert, err := os.ReadFile(filepath.Join(pki, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	caKey, err := os.ReadFile(filepath.Join(pki, "ca.key"))
	if err != nil {
		t.Fatal(err)
	}
	etcdCA := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c-etcd", Labels: map[string]string{clusterv1.ClusterNameLabel: "c"}},
		Type: certs.ClusterSecretType, Data: map[string][]byte{certs.CertKey: caCert, certs.KeyKey: caKey}}
	infra, kcp, cluster := controlPlaneObjects(ns, replicas, 6443)
	for _, o := range []client.Object{kubeconfig, etcdCA, infra,
		provider.InfraMachineTemplate.New(ns, "cp", map[string]any{"template": map[string]any{"spec": map[string]any{}}}),
		kcp, cluster} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatalf("creating %s: %v", o.GetName(), err)
		}
	}
	if err := provider.SetStatus(ctx, c, infra, map[string]any{"initialization": map[string]any{"provisioned": true}}); err != nil {
		t.Fatal(err)
	}
	return kcp
}

// controlPlaneObjects are the infrastructure cluster (its endpoint on
// 127.0.0.1:port), the KubeadmControlPlane c-cp and the Cluster c that
// the tests create.
func controlPlaneObjects(ns string, replicas int32, port int64) (*unstructured.Unstructured, *controlplanev1.KubeadmControlPlane, *clusterv1.Cluster) {
	infra := provider.InfraCluster.New(ns, "c", map[string]any{"controlPlaneEndpoint": map[string]any{"host": "127.0.0.1", "port": port}})
	kcp := &controlplanev1.KubeadmControlPlane{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c-cp"},
		Spec: controlplanev1.KubeadmControlPlaneSpec{
			Replicas: ptr.To(replicas),
			Version:  "v1.35.0",
			MachineTemplate: controlplanev1.KubeadmControlPlaneMachineTemplate{Spec: controlplanev1.KubeadmControlPlaneMachineTemplateSpec{
				InfrastructureRef: provider.InfraMachineTemplate.Ref("cp"),
				// A taint that keeps nothing off the Node, to see the
				// template's taints reach the Machines.
				Taints: []clusterv1.MachineTaint{{Key: "example.com/control-plane", Effect: corev1.TaintEffectPreferNoSchedule,
					Propagation: clusterv1.MachineTaintPropagationOnInitialization}},
			}},
			KubeadmConfigSpec: bootstrapv1.KubeadmConfigSpec{
				ClusterConfiguration: bootstrapv1.ClusterConfiguration{APIServer: bootstrapv1.APIServer{CertSANs: []string{"localhost"}}},
			},
		},
	}
	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c"}}
	cluster.Spec.InfrastructureRef = provider.InfraCluster.Ref("c")
	cluster.Spec.ControlPlaneRef = clusterv1.ContractVersionedObjectReference{APIGroup: controlplanev1.GroupVersion.Group, Kind: "KubeadmControlPlane", Name: "c-cp"}
	return infra, kcp, cluster
}

// kcpTemplateTaints are the taints of the machine template controlPlaneObjects makes.
func kcpTemplateTaints(ns string) []clusterv1.MachineTaint {
	_, kcp, _ := controlPlaneObjects(ns, 1, 0)
	return kcp.Spec.MachineTemplate.Spec.Taints
}

func controlPlaneMachines(t *testing.T, ns string) []clusterv1.Machine {
	t.Helper()
	list := &clusterv1.MachineList{}
	if err := planes.Mgmt.Client.List(context.Background(), list, client.InNamespace(ns), client.MatchingLabels{clusterv1.MachineControlPlaneNameLabel: "c-cp"}); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

func getKCP(t *testing.T, ns string) *controlplanev1.KubeadmControlPlane {
	t.Helper()
	kcp := &controlplanev1.KubeadmControlPlane{}
	if err := planes.Mgmt.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "c-cp"}, kcp); err != nil {
		t.Fatal(err)
	}
	return kcp
}

func conditionMessage(obj interface{ GetConditions() []metav1.Condition }, t string) string {
	if c := conditions.Get(obj, t); c != nil {
		return string(c.Status) + ": " + c.Message
	}
	return "<none>"
}

// TestInitJoinGatesAndDeletion follows a 3-machine control plane from
// nothing: the certificates, one init Machine, no join until kubeadm init
// has finished, no join while etcd has no member for the first Machine (the
// controller reads the member list from a real etcd with a client
// certificate it minted from the cluster's etcd CA), and deletion of the
// whole control plane.
func TestInitJoinGatesAndDeletion(t *testing.T) {
	ns := planes.Mgmt.Namespace(t)
	ctx := context.Background()
	c := planes.Mgmt.Client
	wl := planes.Workload.Client
	createCluster(t, ns, 3)

	fixture.Eventually(t, "certificates and kubeconfig", 30*time.Second, func(context.Context) string {
		for _, name := range []string{"c-ca", "c-proxy", "c-sa", "c-etcd", "c-kubeconfig"} {
			s := &corev1.Secret{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
				return name + ": " + err.Error()
			}
		}
		return ""
	})
	// clusterctl move and the garbage collector find the machine template
	// through its owner: the Cluster.
	fixture.Eventually(t, "the Cluster owns the control plane's machine template", 30*time.Second, func(context.Context) string {
		cluster, tmpl := &clusterv1.Cluster{}, &unstructured.Unstructured{}
		tmpl.SetGroupVersionKind(provider.InfraMachineTemplate.GVK())
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "c"}, cluster); err != nil {
			return err.Error()
		}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "cp"}, tmpl); err != nil {
			return err.Error()
		}
		for _, ref := range tmpl.GetOwnerReferences() {
			if ref.Kind == clusterv1.ClusterKind && ref.UID == cluster.UID && ref.APIVersion == clusterv1.GroupVersion.String() {
				return ""
			}
		}
		return fmt.Sprintf("owners %v", tmpl.GetOwnerReferences())
	})
	etcd := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "c-etcd"}, etcd); err != nil || len(etcd.OwnerReferences) != 0 {
		t.Errorf("the user's etcd CA secret was taken over: owners %v, %v", etcd.OwnerReferences, err)
	}

	var first clusterv1.Machine
	fixture.Eventually(t, "the init Machine", 30*time.Second, func(context.Context) string {
		ms := controlPlaneMachines(t, ns)
		if len(ms) != 1 {
			return fmt.Sprintf("%d Machines", len(ms))
		}
		first = ms[0]
		return ""
	})
	if _, ok := first.Labels[clusterv1.MachineControlPlaneLabel]; !ok || first.Labels[clusterv1.ClusterNameLabel] != "c" || first.Spec.Version != "v1.35.0" {
		t.Errorf("init Machine labels %v version %s", first.Labels, first.Spec.Version)
	}
	if _, ok := first.Annotations[controlplanev1.PreTerminateHookCleanupAnnotation]; !ok {
		t.Error("init Machine has no pre-terminate hook")
	}
	if !reflect.DeepEqual(first.Spec.Taints, kcpTemplateTaints(ns)) {
		t.Errorf("init Machine taints %+v, want the machine template's", first.Spec.Taints)
	}
	var clusterCfg bootstrapv1.ClusterConfiguration
	if err := json.Unmarshal([]byte(first.Annotations[controlplanev1.KubeadmClusterConfigurationAnnotation]), &clusterCfg); err != nil || len(clusterCfg.APIServer.CertSANs) != 1 {
		t.Errorf("cluster configuration annotation: %v %v", clusterCfg, err)
	}
	// Machines first: the Machine exists before its KubeadmConfig.
	cfg := &bootstrapv1.KubeadmConfig{}
	fixture.Eventually(t, "the init Machine's KubeadmConfig", 30*time.Second, func(context.Context) string {
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: first.Spec.Bootstrap.ConfigRef.Name}, cfg); err != nil {
			return err.Error()
		}
		return ""
	})
	if cfg.Spec.JoinConfiguration.ControlPlane != nil || len(cfg.Spec.ClusterConfiguration.APIServer.CertSANs) != 1 {
		t.Errorf("init KubeadmConfig spec: %+v", cfg.Spec)
	}
	// The Machine's objects are created owned by it; once the Machine
	// controller has read them, it still has not written their owners.
	fixture.Eventually(t, "the Machine controller read the init Machine's objects", 30*time.Second, func(context.Context) string {
		m := &clusterv1.Machine{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(&first), m); err != nil {
			return err.Error()
		}
		return objectsRead(m)
	})
	infra := provider.InfraMachine.New(ns, first.Spec.InfrastructureRef.Name, nil)
	if err := c.Get(ctx, client.ObjectKeyFromObject(infra), infra); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(cfg), cfg); err != nil {
		t.Fatal(err)
	}
	ownedByMachineAtCreation(t, cfg, &first)
	ownedByMachineAtCreation(t, infra, &first)

	fixture.Consistently(t, "no join before kubeadm init finished", 3*time.Second, func(context.Context) string {
		if n := len(controlPlaneMachines(t, ns)); n != 1 {
			return fmt.Sprintf("%d Machines", n)
		}
		// A new control plane's first report may still be on its way.
		if msg := conditionMessage(getKCP(t, ns), controlplanev1.KubeadmControlPlaneInitializedCondition); !strings.HasPrefix(msg, "False") && msg != "<none>" {
			return "Initialized " + msg
		}
		return ""
	})
	if msg := conditionMessage(getKCP(t, ns), controlplanev1.KubeadmControlPlaneInitializedCondition); !strings.HasPrefix(msg, "False") {
		t.Errorf("after 3s without kubeadm init: Initialized %s, want False", msg)
	}

	// kubeadm init leaves its ConfigMap, and the node's kubelet publishes
	// the control-plane Pods; etcd's only member is named after the
	// workload plane, not after the Machine's Node.
	if err := wl.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kubeadm-config"}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	fixture.Eventually(t, "the first Machine's Node", 30*time.Second, func(context.Context) string {
		if err := c.Get(ctx, client.ObjectKeyFromObject(&first), &first); err != nil {
			return err.Error()
		}
		if first.Status.NodeRef.Name == "" {
			return "no nodeRef"
		}
		return ""
	})
	runKubelet(t, first.Status.NodeRef.Name, etcdClientAddr(t))

	fixture.Eventually(t, "initialized, and the join held back by etcd", 30*time.Second, func(context.Context) string {
		kcp := getKCP(t, ns)
		if !ptr.Deref(kcp.Status.Initialization.ControlPlaneInitialized, false) {
			return "not initialized: " + conditionMessage(kcp, controlplanev1.KubeadmControlPlaneInitializedCondition)
		}
		if v := kcp.Status.Versions; len(v) != 1 || v[0].Replicas != 1 {
			return fmt.Sprintf("versions %+v, want the one Machine", v)
		}
		if msg := conditionMessage(kcp, controlplanev1.KubeadmControlPlaneEtcdClusterHealthyCondition); !strings.Contains(msg, "member capstan belongs to no Machine") {
			return "EtcdClusterHealthy " + msg
		}
		if msg := conditionMessage(kcp, controlplanev1.KubeadmControlPlaneScalingUpCondition); !strings.Contains(msg, "scaling up from 1 to 3") || !strings.Contains(msg, "has no etcd member yet") {
			return "ScalingUp " + msg
		}
		if msg := conditionMessage(kcp, controlplanev1.KubeadmControlPlaneControlPlaneComponentsHealthyCondition); !strings.HasPrefix(msg, "True") {
			return "ControlPlaneComponentsHealthy " + msg
		}
		return ""
	})
	cluster := &clusterv1.Cluster{}
	fixture.Eventually(t, "the Cluster reports its control plane initialized", 30*time.Second, func(context.Context) string {
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "c"}, cluster); err != nil {
			return err.Error()
		}
		if !ptr.Deref(cluster.Status.Initialization.ControlPlaneInitialized, false) {
			return "not yet"
		}
		return ""
	})
	if n := len(controlPlaneMachines(t, ns)); n != 1 {
		t.Fatalf("%d Machines although etcd has no member for the first", n)
	}

	if err := c.Delete(ctx, getKCP(t, ns)); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, "control plane deleted with its Machines", time.Minute, func(context.Context) string {
		if n := len(controlPlaneMachines(t, ns)); n != 0 {
			return fmt.Sprintf("%d Machines left", n)
		}
		kcp := &controlplanev1.KubeadmControlPlane{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "c-cp"}, kcp); !apierrors.IsNotFound(err) {
			return "KubeadmControlPlane still there: " + conditionMessage(kcp, controlplanev1.KubeadmControlPlaneDeletingCondition)
		}
		return ""
	})
}

// etcdClientAddr is where the workload plane's etcd serves its clients.
func etcdClientAddr(t *testing.T) string {
	t.Helper()
	ports := struct {
		EtcdClient int `json:"etcdClient"`
	}{}
	raw, err := os.ReadFile(filepath.Join(planes.Workload.StateDir, "ports.json"))
	if err != nil || json.Unmarshal(raw, &ports) != nil {
		t.Fatalf("reading the workload plane's ports: %v", err)
	}
	return fmt.Sprintf("127.0.0.1:%d", ports.EtcdClient)
}

// runKubelet runs the simulated kubelet of a control-plane machine's node
// in the workload plane until the test ends: it publishes the node's
// control-plane Pods, and forwards port 2379 of its etcd Pod to the
// plane's etcd at etcdAddr, which is how the control plane reaches etcd:
// a port-forward through the workload cluster's API server.
func runKubelet(t *testing.T, node, etcdAddr string) {
	t.Helper()
	ctx := context.Background()
	pki := filepath.Join(planes.Workload.StateDir, "pki")
	ca, err := certs.Load(filepath.Join(pki, "ca.crt"), filepath.Join(pki, "ca.key"))
	if err != nil {
		t.Fatal(err)
	}
	// The plane authorizes with RBAC only: nodes get their rights from the
	// built-in role, as in clusters without the Node authorizer.
	nodes := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "capstan-test-system-nodes"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:node"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: kubelet.NodesGroup}},
	}
	if err := planes.Workload.Client.Create(ctx, nodes); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	creds, err := ca.Issue(certs.Request{CommonName: kubelet.NodeUser(node), Organization: []string{kubelet.NodesGroup}, Client: true}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err := creds.KeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.AnonymousClientConfig(planes.Workload.Config)
	cfg.CertData, cfg.KeyData = creds.CertPEM(), keyPEM
	serving, err := ca.Issue(certs.Request{CommonName: kubelet.NodeUser(node), Organization: []string{kubelet.NodesGroup},
		IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, Server: true}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	clientCAs := x509.NewCertPool()
	clientCAs.AddCert(ca.Cert)
	var pods []kubelet.StaticPod
	for _, comp := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "etcd"} {
		sp := kubelet.StaticPod{Component: comp}
		if comp == "etcd" {
			sp.Ports = map[int32]string{2379: etcdAddr}
		}
		pods = append(pods, sp)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- kubelet.Run(runCtx, kubelet.Options{
			Config: cfg, NodeName: node, KubeletVersion: "v1.35.0", StaticPods: pods,
			Server: &kubelet.ServerOptions{
				Certificate: tls.Certificate{Certificate: [][]byte{serving.Cert.Raw}, PrivateKey: serving.Key, Leaf: serving.Cert},
				ClientCAs:   clientCAs,
			},
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("kubelet of %s: %v", node, err)
		}
	})
}

// objectsRead says what the Machine controller has not read yet of a
// Machine's bootstrap and infrastructure objects, from the conditions it
// mirrors; "" once it has read both.
func objectsRead(m *clusterv1.Machine) string {
	for _, t := range []string{clusterv1.BootstrapConfigReadyCondition, clusterv1.InfrastructureReadyCondition} {
		c := conditions.Get(m, t)
		if c == nil || c.Reason == clusterv1.ObjectDoesNotExistReason || c.Reason == clusterv1.InspectionFailedReason {
			return fmt.Sprintf("%s %+v", t, c)
		}
	}
	return ""
}

// ownedByMachineAtCreation checks that obj's only owner is m, exactly as the
// Machine controller would set it, and that only the control plane's create
// wrote the reference (a takeover patch would add another writer).
func ownedByMachineAtCreation(t *testing.T, obj client.Object, m *clusterv1.Machine) {
	t.Helper()
	if refs := obj.GetOwnerReferences(); len(refs) != 1 || !reflect.DeepEqual(refs[0], contract.MachineOwner(m)) {
		t.Errorf("%s owners %+v, want only Machine %s", obj.GetName(), refs, m.Name)
	}
	for _, e := range obj.GetManagedFields() {
		if e.FieldsV1 != nil && strings.Contains(string(e.FieldsV1.Raw), `"f:ownerReferences"`) && e.Manager != kubeadmcontrolplane.FieldManager {
			t.Errorf("%s owner references written by %s too: %s", obj.GetName(), e.Manager, e.FieldsV1.Raw)
		}
	}
}

// TestMissingObjectsAreCreated plays a manager stopped right after creating
// the first control-plane Machine: the control plane creates its
// KubeadmConfig (kubeadm init, as the Machine is the only one of a control
// plane never initialized) and its infrastructure, both owned by the
// Machine, and creates no other Machine.
func TestMissingObjectsAreCreated(t *testing.T) {
	ns := planes.Mgmt.Namespace(t)
	ctx := context.Background()
	c := planes.Mgmt.Client
	// Nothing listens on the endpoint: the workload cluster cannot tell
	// whether it was initialized, so only the Machines decide.
	infra, kcp, cluster := controlPlaneObjects(ns, 1, 1)
	cluster.Spec.Paused = ptr.To(true)
	for _, o := range []client.Object{infra, provider.InfraMachineTemplate.New(ns, "cp", map[string]any{"template": map[string]any{"spec": map[string]any{"size": "s"}}}), kcp, cluster} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatalf("creating %s: %v", o.GetName(), err)
		}
	}
	if err := provider.SetStatus(ctx, c, infra, map[string]any{"initialization": map[string]any{"provisioned": true}}); err != nil {
		t.Fatal(err)
	}

	// The Machine as the control plane creates it, without its objects.
	m := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c-cp-crash",
			Labels:          map[string]string{clusterv1.ClusterNameLabel: "c", clusterv1.MachineControlPlaneLabel: "", clusterv1.MachineControlPlaneNameLabel: "c-cp"},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(kcp, controlplanev1.GroupVersion.WithKind("KubeadmControlPlane"))},
			Finalizers:      []string{clusterv1.MachineFinalizer}},
		Spec: clusterv1.MachineSpec{
			ClusterName:       "c",
			Version:           "v1.35.0",
			Bootstrap:         clusterv1.Bootstrap{ConfigRef: clusterv1.ContractVersionedObjectReference{APIGroup: bootstrapv1.GroupVersion.Group, Kind: "KubeadmConfig", Name: "c-cp-crash"}},
			InfrastructureRef: provider.InfraMachine.Ref("c-cp-crash"),
		},
	}
	if err := c.Create(ctx, m, client.FieldOwner(kubeadmcontrolplane.FieldManager)); err != nil {
		t.Fatal(err)
	}
	if err := c.Patch(ctx, cluster, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"paused":false}}`))); err != nil {
		t.Fatal(err)
	}

	cfg := &bootstrapv1.KubeadmConfig{}
	machineInfra := provider.InfraMachine.New(ns, "c-cp-crash", nil)
	fixture.Eventually(t, "the Machine's objects", 30*time.Second, func(context.Context) string {
		for _, o := range []client.Object{cfg, machineInfra} {
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "c-cp-crash"}, o); err != nil {
				return err.Error()
			}
		}
		return ""
	})
	ownedByMachineAtCreation(t, cfg, m)
	ownedByMachineAtCreation(t, machineInfra, m)
	if cfg.Spec.JoinConfiguration.ControlPlane != nil || len(cfg.Spec.ClusterConfiguration.APIServer.CertSANs) != 1 {
		t.Errorf("the KubeadmConfig does not run kubeadm init: %+v", cfg.Spec)
	}
	if cfg.Labels[clusterv1.MachineControlPlaneNameLabel] != "c-cp" || cfg.Labels[clusterv1.ClusterNameLabel] != "c" {
		t.Errorf("KubeadmConfig labels %v", cfg.Labels)
	}
	if a := machineInfra.GetAnnotations(); a[clusterv1.TemplateClonedFromNameAnnotation] != "cp" {
		t.Errorf("TestMachine annotations %v", a)
	}
	fixture.Consistently(t, "no second Machine", 2*time.Second, func(context.Context) string {
		if ms := controlPlaneMachines(t, ns); len(ms) != 1 {
			return fmt.Sprintf("%d Machines", len(ms))
		}
		return ""
	})
}
