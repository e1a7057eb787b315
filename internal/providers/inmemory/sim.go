package inmemory

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	controlplanev1 "capstan.dev/capstan/api/controlplane/kubeadm/v1beta2"
	"capstan.dev/capstan/internal/certs"
)

// Annotations and names the simulated cluster shares with the core: kubeadm's
// static Pod annotations that KubeadmControlPlane reads.
const (
	etcdClientURLsAnnotation    = "kubeadm.kubernetes.io/etcd.advertise-client-urls"
	apiServerEndpointAnnotation = "kubeadm.kubernetes.io/kube-apiserver.advertise-address.endpoint"
	kubeSystem                  = "kube-system"
)

var controlPlaneComponents = []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "etcd"}

// certLoader reads a cluster's CAs from the management cluster.
type certLoader func(ctx context.Context, cluster types.NamespacedName) (*certs.ClusterCertificates, error)

// simulator holds every simulated cluster of one provider.
type simulator struct {
	host  string
	load  certLoader
	log   logr.Logger
	mu    sync.Mutex
	clus  map[types.NamespacedName]*simCluster
	calls atomic.Int64 // requests served by all simulated API servers
}

func newSimulator(host string, load certLoader, log logr.Logger) *simulator {
	return &simulator{host: host, load: load, log: log, clus: map[types.NamespacedName]*simCluster{}}
}

// simCluster is one simulated workload cluster: its API server, its
// objects, its etcd members and the timers of its booting machines.
type simCluster struct {
	key      types.NamespacedName
	sim      *simulator
	store    *store
	etcd     *etcdCluster
	listener net.Listener
	server   *http.Server

	mu       sync.Mutex
	cc       *certs.ClusterCertificates
	apiCert  *tls.Certificate
	etcdCert *tls.Certificate
	lastLoad time.Time
	timers   map[string][]*time.Timer // node name -> pending boot stages
	closed   bool
}

// cluster returns the simulated cluster for key, starting its API server on
// port (0: any free port) if it does not run yet.
func (s *simulator) cluster(key types.NamespacedName, port int32) (*simCluster, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.clus[key]; c != nil {
		return c, nil
	}
	l, err := net.Listen("tcp", net.JoinHostPort(s.host, strconv.Itoa(int(port))))
	if err != nil {
		return nil, fmt.Errorf("listening on %s:%d for the simulated API server of %s: %w", s.host, port, key, err)
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(key.String()))
	c := &simCluster{key: key, sim: s, store: newStore(), etcd: newEtcdCluster(h.Sum64() >> 16), listener: l, timers: map[string][]*time.Timer{}}
	c.store.onWrite = c.kubeletReacts
	c.server = &http.Server{
		Handler:           &apiServer{store: c.store, requests: func(string) { s.calls.Add(1) }, dialPod: c.dialPod},
		TLSConfig:         &tls.Config{GetConfigForClient: c.apiTLS, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          nil,
	}
	go func() { _ = c.server.ServeTLS(l, "", "") }()
	s.clus[key] = c
	return c, nil
}

func (s *simulator) get(key types.NamespacedName) *simCluster {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.clus[key]
}

// remove stops a simulated cluster: its listener, every watch, every etcd
// endpoint and pending timer; its objects are dropped.
func (s *simulator) remove(key types.NamespacedName) {
	s.mu.Lock()
	c := s.clus[key]
	delete(s.clus, key)
	s.mu.Unlock()
	if c != nil {
		c.close()
	}
}

func (s *simulator) closeAll() {
	s.mu.Lock()
	all := s.clus
	s.clus = map[types.NamespacedName]*simCluster{}
	s.mu.Unlock()
	for _, c := range all {
		c.close()
	}
}

func (c *simCluster) port() int32 { return int32(c.listener.Addr().(*net.TCPAddr).Port) }

func (c *simCluster) close() {
	c.mu.Lock()
	c.closed = true
	for _, ts := range c.timers {
		for _, t := range ts {
			t.Stop()
		}
	}
	c.timers = nil
	c.mu.Unlock()
	c.store.close()
	_ = c.server.Close()
	c.etcd.close()
}

// certificates loads the cluster's CAs on first need (the first TLS
// handshake), at most once every half second while they do not exist yet,
// and issues the API server's and etcd's serving certificates from them.
func (c *simCluster) certificates() (*tls.Certificate, *tls.Certificate, *certs.ClusterCertificates, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.apiCert != nil {
		return c.apiCert, c.etcdCert, c.cc, nil
	}
	if time.Since(c.lastLoad) < 500*time.Millisecond {
		return nil, nil, nil, errors.New("the cluster's certificate authorities are not there yet")
	}
	c.lastLoad = time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cc, err := c.sim.load(ctx, c.key)
	if cc == nil || cc.CA == nil || cc.EtcdCA == nil {
		return nil, nil, nil, fmt.Errorf("the cluster's certificate authorities are not there yet: %v", err)
	}
	issue := func(ca *certs.KeyPair, cn string) (*tls.Certificate, error) {
		leaf, err := ca.Issue(certs.Request{
			CommonName: cn, Server: true, Client: true,
			DNSNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
			IPs:      []net.IP{net.ParseIP(c.sim.host), net.ParseIP("127.0.0.1")},
			Lifetime: 365 * 24 * time.Hour,
			// The simulator's own serving keys are never stored or read by
			// anyone, and clients verify them against the cluster CA
			// whatever their type; P-256 keeps two RSA key generations per
			// cluster out of the controller benchmarks this provider is for.
			KeyAlgorithm: certs.ECDSAP256,
		}, time.Now())
		if err != nil {
			return nil, err
		}
		return &tls.Certificate{Certificate: [][]byte{leaf.Cert.Raw, ca.Cert.Raw}, PrivateKey: leaf.Key, Leaf: leaf.Cert}, nil
	}
	api, err := issue(cc.CA, "kube-apiserver")
	if err != nil {
		return nil, nil, nil, err
	}
	etcd, err := issue(cc.EtcdCA, "etcd")
	if err != nil {
		return nil, nil, nil, err
	}
	c.cc, c.apiCert, c.etcdCert = cc, api, etcd
	return api, etcd, cc, nil
}

// apiTLS serves the API server's certificate and verifies a client
// certificate against the cluster CA. A client may come without one: the
// API server then answers 401 but for its public health and version
// endpoints (apiServer.ServeHTTP).
func (c *simCluster) apiTLS(*tls.ClientHelloInfo) (*tls.Config, error) {
	api, _, cc, err := c.certificates()
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(cc.CA.Cert)
	return &tls.Config{Certificates: []tls.Certificate{*api}, ClientCAs: pool, ClientAuth: tls.VerifyClientCertIfGiven,
		NextProtos: []string{"h2", "http/1.1"}, MinVersion: tls.VersionTLS12}, nil
}

// etcdTLS serves etcd's certificate and requires clients from the etcd CA,
// as kubeadm's etcd does.
func (c *simCluster) etcdTLS(*tls.ClientHelloInfo) (*tls.Config, error) {
	_, etcd, cc, err := c.certificates()
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(cc.EtcdCA.Cert)
	return &tls.Config{Certificates: []tls.Certificate{*etcd}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert,
		NextProtos: []string{"h2"}, MinVersion: tls.VersionTLS12}, nil
}

// machineSpec is what the simulated kubelet needs to know of its machine.
type machineSpec struct {
	nodeName     string
	providerID   string
	version      string
	controlPlane bool
	delays       resolvedDelays
}

// boot starts the simulated machine's kubelet: the Node registers Ready
// after the node delay; on a control-plane machine the etcd member and Pod
// follow after the etcd delay, the other static Pods after the API server
// delay, and the first control plane records kubeadm's init (the
// kubeadm-config ConfigMap) once both are up. Booting an already booted
// machine only fills in what is missing (after a manager restart nothing
// of the simulation is left).
func (c *simCluster) boot(m machineSpec) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.timers[m.nodeName] != nil {
		return
	}
	nodeAt := m.delays.node()
	c.timers[m.nodeName] = []*time.Timer{time.AfterFunc(nodeAt, func() { c.registerNode(m) })}
	if m.controlPlane {
		etcdAt := nodeAt + m.delays.etcd()
		apiAt := nodeAt + m.delays.apiServer()
		c.timers[m.nodeName] = append(c.timers[m.nodeName],
			time.AfterFunc(etcdAt, func() { c.startEtcd(m) }),
			time.AfterFunc(apiAt, func() { c.startControlPlanePods(m) }),
		)
	}
}

// shutdown stops a machine: its pending boot stages, Node, Pods and etcd
// member go.
func (c *simCluster) shutdown(nodeName string) {
	c.mu.Lock()
	for _, t := range c.timers[nodeName] {
		t.Stop()
	}
	delete(c.timers, nodeName)
	c.mu.Unlock()
	pods, _ := c.store.list("/pods", "", nil, nil)
	for _, p := range pods {
		if fieldValue(p, "spec.nodeName") == nodeName {
			ns, name := nameOf(p)
			_, _ = c.store.remove(gr("", "pods"), "/pods", ns, name)
		}
	}
	_, _ = c.store.remove(gr("", "nodes"), "/nodes", "", nodeName)
	if id := c.etcd.memberByName(nodeName); id != 0 {
		c.etcd.removeMember(id)
	}
}

func gr(group, res string) schema.GroupResource {
	return schema.GroupResource{Group: group, Resource: res}
}

func now() string { return time.Now().UTC().Format(time.RFC3339) }

func (c *simCluster) registerNode(m machineSpec) {
	labels := map[string]any{"kubernetes.io/hostname": m.nodeName, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}
	if m.controlPlane {
		labels["node-role.kubernetes.io/control-plane"] = ""
	}
	meta := map[string]any{"name": m.nodeName, "labels": labels}
	if m.controlPlane {
		// Its simulated API server leaves the load balancer when asked.
		meta["annotations"] = map[string]any{controlplanev1.LoadBalancerLeaverAnnotation: "true"}
	}
	node := object{
		"apiVersion": "v1", "kind": "Node",
		"metadata": meta,
		"spec":     map[string]any{"providerID": m.providerID},
		"status": map[string]any{
			"conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": "KubeletReady",
				"message": "simulated kubelet is posting ready status", "lastHeartbeatTime": now(), "lastTransitionTime": now()}},
			"addresses": []any{map[string]any{"type": "InternalIP", "address": c.sim.host}, map[string]any{"type": "Hostname", "address": m.nodeName}},
			"nodeInfo":  map[string]any{"kubeletVersion": m.version, "kubeProxyVersion": m.version, "operatingSystem": "linux", "architecture": "amd64", "containerRuntimeVersion": "simulated://1.0"},
		},
	}
	if _, err := c.store.create(gr("", "nodes"), "/nodes", node); err != nil && !isExists(err) {
		c.sim.log.V(1).Info("Simulated Node not registered", "cluster", c.key.String(), "node", m.nodeName, "error", err.Error())
	}
}

func (c *simCluster) startEtcd(m machineSpec) {
	url := c.etcd.addMember(m.nodeName, c.sim.host, &tls.Config{GetConfigForClient: c.etcdTLS, MinVersion: tls.VersionTLS12})
	c.staticPod(m, "etcd", map[string]any{etcdClientURLsAnnotation: url})
	c.maybeInit()
}

func (c *simCluster) startControlPlanePods(m machineSpec) {
	endpoint := net.JoinHostPort(c.sim.host, strconv.Itoa(int(c.port())))
	for _, comp := range controlPlaneComponents {
		if comp == "etcd" {
			continue
		}
		ann := map[string]any{}
		if comp == "kube-apiserver" {
			ann[apiServerEndpointAnnotation] = endpoint
		}
		c.staticPod(m, comp, ann)
	}
	c.maybeInit()
}

// staticPod records a Running, Ready mirror Pod of a control-plane
// component on the machine's Node.
func (c *simCluster) staticPod(m machineSpec, component string, annotations map[string]any) {
	pod := object{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{
			"name": component + "-" + m.nodeName, "namespace": kubeSystem,
			"labels":      map[string]any{"component": component, "tier": "control-plane"},
			"annotations": annotations,
		},
		"spec": map[string]any{"nodeName": m.nodeName, "priorityClassName": "system-node-critical",
			"containers": []any{map[string]any{"name": component, "image": "registry.k8s.io/" + component + ":" + m.version}}},
		"status": map[string]any{"phase": "Running", "conditions": []any{
			map[string]any{"type": "Ready", "status": "True", "lastTransitionTime": now()},
		}},
	}
	if _, err := c.store.create(gr("", "pods"), "/pods", pod); err != nil && !isExists(err) {
		c.sim.log.V(1).Info("Simulated static Pod not created", "cluster", c.key.String(), "pod", component+"-"+m.nodeName, "error", err.Error())
	}
}

// maybeInit writes what kubeadm init leaves behind once a control plane
// has both its API server and etcd: the kube-system Namespace and the
// kubeadm-config ConfigMap KubeadmControlPlane takes as "initialized".
func (c *simCluster) maybeInit() {
	pods, _ := c.store.list("/pods", kubeSystem, nil, nil)
	api, etcd := false, false
	for _, p := range pods {
		labels, _ := metaOf(p)["labels"].(map[string]any)
		switch labels["component"] {
		case "kube-apiserver":
			api = true
		case "etcd":
			etcd = true
		}
	}
	if !api || !etcd {
		return
	}
	if _, ok := c.store.get("/namespaces", "", kubeSystem); !ok {
		_, _ = c.store.create(gr("", "namespaces"), "/namespaces", object{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": kubeSystem}})
	}
	if _, ok := c.store.get("/configmaps", kubeSystem, "kubeadm-config"); ok {
		return
	}
	endpoint := net.JoinHostPort(c.sim.host, strconv.Itoa(int(c.port())))
	cm := object{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "kubeadm-config", "namespace": kubeSystem},
		"data": map[string]any{"ClusterConfiguration": "apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\n" +
			"clusterName: " + c.key.Name + "\ncontrolPlaneEndpoint: " + endpoint + "\n"},
	}
	_, _ = c.store.create(gr("", "configmaps"), "/configmaps", cm)
}

// kubeletReacts is what the simulated machines do about a write to their
// cluster: a Node asked to leave the control-plane load balancer says it
// has (there is no load balancer to drain).
func (c *simCluster) kubeletReacts(res string, o object) {
	if res != "/nodes" {
		return
	}
	ann, _ := metaOf(o)["annotations"].(map[string]any)
	if ann[controlplanev1.LeaveLoadBalancerAnnotation] != "true" || ann[controlplanev1.LeftLoadBalancerAnnotation] == "true" {
		return
	}
	updated := copyObject(o)
	a := metaOf(updated)["annotations"].(map[string]any)
	a[controlplanev1.LeftLoadBalancerAnnotation] = "true"
	_, _ = c.store.update(gr("", "nodes"), "/nodes", updated)
}

func isExists(err error) bool { return apierrors.IsAlreadyExists(err) }
