package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/certs"
	"capstan.dev/capstan/internal/manager"
	"capstan.dev/capstan/internal/mgmt"
	"capstan.dev/capstan/internal/procstat"
	"capstan.dev/capstan/internal/providers/inmemory"
	"capstan.dev/capstan/internal/scheme"
	"capstan.dev/capstan/internal/version"
)

// Config is one scale run.
type Config struct {
	// Clusters is N, the number of clusters created at once.
	Clusters int
	// Workers is M, the MachineDeployment replicas of each cluster (each
	// cluster also has one control-plane machine).
	Workers int
	// NoDelays makes every simulated start-up stage instant; otherwise the
	// provider's defaults apply (machine 10s, others 2s, ±20%).
	NoDelays bool
	// Kubeconfig, when set, is the management cluster to use; otherwise a
	// plane is started from Binary.
	Kubeconfig string
	// Binary is the capstan binary whose `up` starts the plane; empty means
	// the running executable.
	Binary string
	// Namespace holds the run's objects; empty means a fresh one.
	Namespace string
	// Timeout bounds the wait for every Machine to be Running.
	Timeout time.Duration
	// Progress, when set, gets a line now and then while waiting.
	Progress io.Writer
	// Topology makes each cluster a managed topology of one shared
	// ClusterClass of the same shape (TopologyManifests) instead of the
	// objects a generated manifest holds.
	Topology bool
	// KeyAlgorithm is every cluster's kubeadm encryptionAlgorithm, which
	// its certificate authorities and credentials use; empty means
	// kubeadm's default, RSA-2048.
	KeyAlgorithm certs.KeyAlgorithm
	// Hold, when set, is called once the run is measured, with the plane,
	// the controllers and every cluster still running (the result names
	// the kubeconfig), so that something else can look at a live fleet:
	// `capstan bench scale --keep` waits there for Ctrl-C. Run stops them
	// only after Hold returns.
	Hold func(ctx context.Context, res *Result) error
}

// Result is what a run measured.
type Result struct {
	// Namespace holds the run's clusters, named c0, c1, ...
	Namespace string `json:"namespace"`
	// Kubeconfig is the management cluster's, for a run with Config.Hold:
	// it works until Hold returns.
	Kubeconfig string `json:"kubeconfig,omitempty"`
	Clusters   int    `json:"clusters"`
	Workers    int    `json:"workersPerCluster"`
	Machines   int    `json:"machines"`
	Delays     string `json:"delays"`
	Running    int    `json:"machinesRunning"`
	// Seconds from the first create to 50%, 90% and 100% of Machines Running.
	To50  float64 `json:"secondsTo50PercentRunning"`
	To90  float64 `json:"secondsTo90PercentRunning"`
	To100 float64 `json:"secondsTo100PercentRunning"`
	// API server requests during the run, from its apiserver_request_total.
	Requests float64 `json:"requests"`
	Writes   float64 `json:"writes"`
	// BenchWrites are the benchmark's own creates, included in Writes.
	BenchWrites float64 `json:"benchWrites"`
	// WritesPerMachine counts every write; ControllerWritesPerMachine
	// leaves out the benchmark's own creates.
	WritesPerMachine           float64            `json:"writesPerMachine"`
	ControllerWritesPerMachine float64            `json:"controllerWritesPerMachine"`
	WritesByVerbResource       map[string]float64 `json:"writesByVerbResource"`
	// ReadsByVerbResource are the other requests (GET, LIST, WATCH): each
	// costs less than a write, but a GET the cache could have answered is
	// still a quorum read of etcd.
	ReadsByVerbResource     map[string]float64 `json:"readsByVerbResource"`
	Conflicts               float64            `json:"conflicts"`
	ConflictPercent         float64            `json:"conflictPercentOfWrites"`
	ConflictsByVerbResource map[string]float64 `json:"conflictsByVerbResource,omitempty"`
	ManagerCPUSeconds       float64            `json:"managerCPUSeconds"`
	ManagerPeakRSSMiB       float64            `json:"managerPeakRSSMiB"`
	// PlaneCPUSeconds and PlanePeakRSSMiB are the management plane's (API
	// server and etcd, one process) when the run started its own.
	PlaneCPUSeconds   float64            `json:"planeCPUSeconds,omitempty"`
	PlanePeakRSSMiB   float64            `json:"planePeakRSSMiB,omitempty"`
	ObjectsPerCluster map[string]float64 `json:"objectsPerCluster"`
	// KeyAlgorithm is the clusters' key algorithm; KeysPerCluster the
	// private keys of that algorithm the manager generated during the run,
	// per cluster (with ECDSA-P256 also the in-memory provider's two
	// serving keys per cluster, which are always P-256).
	KeyAlgorithm   certs.KeyAlgorithm `json:"keyAlgorithm"`
	KeysPerCluster float64            `json:"keysPerCluster"`
	// KeySeconds is what one key of KeyAlgorithm took on one CPU, measured
	// before the run; KeyFloorSeconds is the least time the run's keys
	// take on every CPU Go uses (keys × KeySeconds ÷ CPUs).
	KeySeconds      float64 `json:"keySeconds"`
	KeyFloorSeconds float64 `json:"keyFloorSeconds"`
	CPUs            int     `json:"cpus"`
	// Topology runs: TopologyAppliesPerMachine are the server-side applies
	// of objects (not of a status) per Machine, which only the topology
	// controller makes: its share of the writes, but for its patches of
	// the Cluster and its deletions of templates.
	Topology                  bool    `json:"topology,omitempty"`
	TopologyAppliesPerMachine float64 `json:"topologyAppliesPerMachine,omitempty"`
}

// Run starts a plane (unless cfg.Kubeconfig), runs the manager with the
// in-memory provider in this process, creates the clusters and measures.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if cfg.Clusters <= 0 || cfg.Workers < 0 {
		return nil, fmt.Errorf("--clusters must be at least 1 and --workers at least 0 (got %d and %d)", cfg.Clusters, cfg.Workers)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 30 * time.Minute
	}
	if err := cfg.KeyAlgorithm.Validate(); err != nil {
		return nil, fmt.Errorf("--key-algorithm: %w", err)
	}
	restCfg, kubeconfig, planePID, stop, err := managementCluster(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer stop()

	opts := &inmemory.Options{}
	delays := "default"
	if cfg.NoDelays {
		opts.Delays = inmemory.NoDelays()
		delays = "0"
	}
	mgrCtx, cancel := context.WithCancel(ctx)
	mgr, err := manager.New(restCfg, manager.Options{
		MetricsAddr: "0", ProbeAddr: "0", AllowRestartInProcess: true,
		QPS: 1000, Burst: 2000, InMemory: opts,
	})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("building the manager: %w", err)
	}
	mgrDone := make(chan error, 1)
	go func() { mgrDone <- mgr.Start(mgrCtx) }()
	defer func() {
		cancel()
		<-mgrDone
	}()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		return nil, fmt.Errorf("the manager's caches did not sync")
	}

	direct, err := client.New(restCfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return nil, err
	}
	ns := cfg.Namespace
	if ns == "" {
		ns = fmt.Sprintf("bench-%d", time.Now().Unix())
	}
	objs, err := Manifests(ns, cfg.Clusters, cfg.Workers)
	sharedCount := 1
	if cfg.Topology {
		objs, sharedCount, err = TopologyManifests(ns, cfg.Clusters, cfg.Workers)
	}
	if err != nil {
		return nil, err
	}
	alg := cfg.KeyAlgorithm
	if alg == "" {
		alg = certs.DefaultKeyAlgorithm
	}
	if cfg.KeyAlgorithm != "" {
		setKeyAlgorithm(objs, alg)
	}
	keySeconds, err := certs.KeyCost(alg, keySamples)
	if err != nil {
		return nil, err
	}
	keysBefore := certs.KeysGenerated()[alg]
	before, err := ScrapeRequests(ctx, restCfg)
	if err != nil {
		return nil, err
	}
	cpuBefore := cpuSeconds()
	var planeBefore procstat.Usage
	if planePID != 0 {
		if planeBefore, err = procstat.Read(planePID); err != nil {
			return nil, fmt.Errorf("reading the API server's CPU time: %w", err)
		}
	}
	machines := cfg.Clusters * (1 + cfg.Workers)
	res := &Result{Namespace: ns, Clusters: cfg.Clusters, Workers: cfg.Workers, Machines: machines, Delays: delays}

	start := time.Now()
	classReady := func() error { return nil }
	if cfg.Topology {
		// The class is the environment the clusters are made in: its
		// controller checks it before the first Cluster names it.
		classReady = func() error { return waitClassReconciled(ctx, mgr.GetClient(), ns) }
	}
	if err := createAll(ctx, direct, objs, sharedCount, classReady); err != nil {
		return nil, err
	}
	res.BenchWrites = float64(len(objs))
	// Waiting reads the manager's cache: no request to the API server.
	if err := waitRunning(ctx, mgr.GetClient(), ns, machines, start, cfg, res); err != nil {
		return res, err
	}
	// Let the last status writes land before counting.
	time.Sleep(3 * time.Second)
	after, err := ScrapeRequests(ctx, restCfg)
	if err != nil {
		return res, err
	}
	res.ManagerCPUSeconds = cpuSeconds() - cpuBefore
	res.ManagerPeakRSSMiB = peakRSSMiB()
	if planePID != 0 {
		plane, err := procstat.Read(planePID)
		if err != nil {
			return res, fmt.Errorf("reading the API server's CPU time: %w", err)
		}
		res.PlaneCPUSeconds = plane.CPUSeconds - planeBefore.CPUSeconds
		res.PlanePeakRSSMiB = plane.PeakRSSMiB
	}
	d := after.Minus(before)
	res.Requests = d.Total()
	res.Writes = d.Writes()
	res.Conflicts = d.Conflicts
	res.ConflictsByVerbResource = d.ConflictsByKey
	res.WritesByVerbResource = map[string]float64{}
	res.ReadsByVerbResource = map[string]float64{}
	for k, v := range d.ByVerbResource {
		if isWrite(k) {
			res.WritesByVerbResource[k] = v
		} else {
			res.ReadsByVerbResource[k] = v
		}
	}
	res.WritesPerMachine = res.Writes / float64(machines)
	if cfg.Topology {
		res.Topology = true
		for k, v := range res.WritesByVerbResource {
			if strings.HasPrefix(k, "APPLY ") && !strings.Contains(k, "/") {
				res.TopologyAppliesPerMachine += v / float64(machines)
			}
		}
	}
	res.ControllerWritesPerMachine = (res.Writes - res.BenchWrites) / float64(machines)
	if res.Writes > 0 {
		res.ConflictPercent = 100 * res.Conflicts / res.Writes
	}
	res.ObjectsPerCluster = objectsPerCluster(ctx, direct, ns, cfg.Clusters)
	keys := float64(certs.KeysGenerated()[alg] - keysBefore)
	res.KeyAlgorithm, res.KeySeconds, res.CPUs = alg, keySeconds.Seconds(), runtime.GOMAXPROCS(0)
	res.KeysPerCluster = keys / float64(cfg.Clusters)
	res.KeyFloorSeconds = keys * res.KeySeconds / float64(res.CPUs)
	if cfg.Hold != nil {
		res.Kubeconfig = kubeconfig
		if err := cfg.Hold(ctx, res); err != nil {
			return res, err
		}
	}
	if cfg.Kubeconfig != "" {
		// Someone else's cluster: take the run's clusters away again,
		// while the controllers still run to finish their deletion.
		if err := cleanUp(ctx, direct, ns, cfg.Progress); err != nil {
			return res, err
		}
	}
	return res, nil
}

// cleanUp deletes the run's Clusters, waits until every object they own is
// gone, then deletes the namespace.
func cleanUp(ctx context.Context, c client.Client, ns string, progress io.Writer) error {
	if progress != nil {
		fmt.Fprintf(progress, "Deleting the run's clusters in namespace %s.\n", ns)
	}
	if err := c.DeleteAllOf(ctx, &clusterv1.Cluster{}, client.InNamespace(ns)); err != nil {
		return fmt.Errorf("deleting the run's Clusters: %w", err)
	}
	deadline := time.Now().Add(10 * time.Minute)
	for {
		machines := &clusterv1.MachineList{}
		clusters := &clusterv1.ClusterList{}
		if err := c.List(ctx, clusters, client.InNamespace(ns)); err != nil {
			return err
		}
		if err := c.List(ctx, machines, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(clusters.Items)+len(machines.Items) == 0 {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d Clusters and %d Machines of the run were still in namespace %s after 10 minutes", len(clusters.Items), len(machines.Items), ns)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
	nsObj := &unstructured.Unstructured{}
	nsObj.SetAPIVersion("v1")
	nsObj.SetKind("Namespace")
	nsObj.SetName(ns)
	return client.IgnoreNotFound(c.Delete(ctx, nsObj))
}

// managementCluster is the plane to run against, its kubeconfig file, and
// how to let it go.
func managementCluster(ctx context.Context, cfg Config) (*rest.Config, string, int, func(), error) {
	if cfg.Kubeconfig != "" {
		restCfg, err := clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig)
		if err != nil {
			return nil, "", 0, nil, fmt.Errorf("--kubeconfig %s: %w", cfg.Kubeconfig, err)
		}
		// The in-memory kinds may be new to that cluster.
		if err := mgmt.InstallCRDs(ctx, restCfg); err != nil {
			return nil, "", 0, nil, err
		}
		return restCfg, cfg.Kubeconfig, 0, func() {}, nil
	}
	bin := cfg.Binary
	if bin == "" {
		var err error
		if bin, err = os.Executable(); err != nil {
			return nil, "", 0, nil, err
		}
	}
	p, err := startPlane(bin)
	if err != nil {
		return nil, "", 0, nil, err
	}
	restCfg, err := clientcmd.BuildConfigFromFlags("", p.kubeconfig)
	if err != nil {
		p.stop()
		return nil, "", 0, nil, err
	}
	restCfg.QPS, restCfg.Burst = 1000, 2000
	return restCfg, p.kubeconfig, p.cmd.Process.Pid, p.stop, nil
}

// shared is the run's namespace; perCluster is one cluster as a generated
// manifest has it: Cluster, InMemoryCluster, KubeadmControlPlane,
// MachineDeployment, and the cluster's own templates (one InMemoryMachine
// template serves both its control plane and its workers).
const shared = `
apiVersion: v1
kind: Namespace
metadata:
  name: NS
`

const perCluster = `
apiVersion: cluster.x-k8s.io/v1beta2
kind: Cluster
metadata: {name: NAME, namespace: NS}
spec:
  clusterNetwork: {pods: {cidrBlocks: ["10.244.0.0/16"]}, services: {cidrBlocks: ["10.96.0.0/12"]}}
  infrastructureRef: {apiGroup: infrastructure.cluster.x-k8s.io, kind: InMemoryCluster, name: NAME}
  controlPlaneRef: {apiGroup: controlplane.cluster.x-k8s.io, kind: KubeadmControlPlane, name: NAME-cp}
---
apiVersion: infrastructure.cluster.x-k8s.io/v1beta2
kind: InMemoryMachineTemplate
metadata: {name: NAME, namespace: NS}
spec: {template: {spec: {}}}
---
apiVersion: bootstrap.cluster.x-k8s.io/v1beta2
kind: KubeadmConfigTemplate
metadata: {name: NAME-worker, namespace: NS}
spec: {template: {spec: {joinConfiguration: {nodeRegistration: {name: "{{ ds.meta_data.local_hostname }}"}}}}}
---
apiVersion: infrastructure.cluster.x-k8s.io/v1beta2
kind: InMemoryCluster
metadata: {name: NAME, namespace: NS}
---
apiVersion: controlplane.cluster.x-k8s.io/v1beta2
kind: KubeadmControlPlane
metadata: {name: NAME-cp, namespace: NS}
spec:
  replicas: 1
  version: VERSION
  machineTemplate:
    spec:
      infrastructureRef: {apiGroup: infrastructure.cluster.x-k8s.io, kind: InMemoryMachineTemplate, name: NAME}
  kubeadmConfigSpec:
    initConfiguration: {nodeRegistration: {name: "{{ ds.meta_data.local_hostname }}"}}
    joinConfiguration: {nodeRegistration: {name: "{{ ds.meta_data.local_hostname }}"}}
---
apiVersion: cluster.x-k8s.io/v1beta2
kind: MachineDeployment
metadata: {name: NAME-md, namespace: NS}
spec:
  clusterName: NAME
  replicas: WORKERS
  template:
    spec:
      clusterName: NAME
      version: VERSION
      bootstrap:
        configRef: {apiGroup: bootstrap.cluster.x-k8s.io, kind: KubeadmConfigTemplate, name: NAME-worker}
      infrastructureRef: {apiGroup: infrastructure.cluster.x-k8s.io, kind: InMemoryMachineTemplate, name: NAME}
`

// keySamples is how many keys measure one key's cost: RSA key generation
// time varies a lot from key to key.
const keySamples = 8

// setKeyAlgorithm sets alg as the kubeadm encryptionAlgorithm of every
// KubeadmControlPlane and KubeadmControlPlaneTemplate in objs.
func setKeyAlgorithm(objs []*unstructured.Unstructured, alg certs.KeyAlgorithm) {
	for _, o := range objs {
		var path []string
		switch o.GetKind() {
		case "KubeadmControlPlane":
			path = []string{"spec", "kubeadmConfigSpec", "clusterConfiguration", "encryptionAlgorithm"}
		case "KubeadmControlPlaneTemplate":
			path = []string{"spec", "template", "spec", "kubeadmConfigSpec", "clusterConfiguration", "encryptionAlgorithm"}
		default:
			continue
		}
		_ = unstructured.SetNestedField(o.Object, string(alg), path...)
	}
}

// Manifests are a run's objects: the namespace, then every cluster's
// (named c0, c1, ...).
func Manifests(ns string, clusters, workers int) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	add := func(doc string) (err error) {
		out, err = appendDocuments(out, doc)
		return err
	}
	if err := add(strings.ReplaceAll(shared, "NS", ns)); err != nil {
		return nil, err
	}
	r := strings.NewReplacer("NS", ns, "VERSION", kubernetesVersion(), "WORKERS", fmt.Sprint(workers))
	for i := 0; i < clusters; i++ {
		if err := add(strings.ReplaceAll(r.Replace(perCluster), "NAME", fmt.Sprintf("c%d", i))); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// appendDocuments appends the objects of a multi-document YAML manifest.
func appendDocuments(out []*unstructured.Unstructured, doc string) ([]*unstructured.Unstructured, error) {
	for _, part := range strings.Split(doc, "\n---\n") {
		if strings.TrimSpace(part) == "" {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(part), &u.Object); err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, nil
}

// createAll creates the first sharedCount objects (what the clusters
// share), waits until ready says they are, then creates every cluster's in
// parallel, as fast as the API server takes them ("all at once").
func createAll(ctx context.Context, c client.Client, objs []*unstructured.Unstructured, sharedCount int, ready func() error) error {
	for _, o := range objs[:sharedCount] {
		if err := c.Create(ctx, o); err != nil {
			return fmt.Errorf("creating %s %s: %w", o.GetKind(), o.GetName(), err)
		}
	}
	if err := ready(); err != nil {
		return err
	}
	work := make(chan *unstructured.Unstructured)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for o := range work {
				if err := c.Create(ctx, o); err != nil {
					mu.Lock()
					if first == nil {
						first = fmt.Errorf("creating %s %s: %w", o.GetKind(), o.GetName(), err)
					}
					mu.Unlock()
				}
			}
		}()
	}
	for _, o := range objs[sharedCount:] {
		work <- o
	}
	close(work)
	wg.Wait()
	return first
}

// waitRunning counts Running Machines in the manager's cache until all
// are, noting when half, 90% and all got there.
func waitRunning(ctx context.Context, c client.Reader, ns string, want int, start time.Time, cfg Config, res *Result) error {
	deadline := time.After(cfg.Timeout)
	// Every look lists all Machines; at thousands of them that costs, so
	// look twice a second and without copying.
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	lastReport := time.Now()
	for {
		list := &clusterv1.MachineList{}
		if err := c.List(ctx, list, client.InNamespace(ns), client.UnsafeDisableDeepCopy); err != nil {
			return err
		}
		running := 0
		for _, m := range list.Items {
			if m.Status.Phase == string(clusterv1.MachinePhaseRunning) {
				running++
			}
		}
		res.Running = running
		elapsed := time.Since(start).Seconds()
		if res.To50 == 0 && running*2 >= want {
			res.To50 = elapsed
		}
		if res.To90 == 0 && running*10 >= want*9 {
			res.To90 = elapsed
		}
		if running >= want {
			res.To100 = elapsed
			return nil
		}
		if cfg.Progress != nil && time.Since(lastReport) >= 5*time.Second {
			lastReport = time.Now()
			fmt.Fprintf(cfg.Progress, "  [%6.1fs] machines %d/%d running (%d exist)\n", elapsed, running, want, len(list.Items))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline:
			return fmt.Errorf("only %d of %d Machines were Running after %s; for example:%s", running, want, cfg.Timeout, notRunning(list.Items, 5))
		case <-tick.C:
		}
	}
}

// countedKinds are the management-cluster objects a cluster costs.
var countedKinds = []schema.GroupVersionKind{
	{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "ClusterList"},
	{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "MachineList"},
	{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "MachineSetList"},
	{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "MachineDeploymentList"},
	{Group: "controlplane.cluster.x-k8s.io", Version: "v1beta2", Kind: "KubeadmControlPlaneList"},
	{Group: "bootstrap.cluster.x-k8s.io", Version: "v1beta2", Kind: "KubeadmConfigList"},
	{Group: "infrastructure.cluster.x-k8s.io", Version: "v1beta2", Kind: "InMemoryClusterList"},
	{Group: "infrastructure.cluster.x-k8s.io", Version: "v1beta2", Kind: "InMemoryMachineList"},
	{Version: "v1", Kind: "SecretList"},
	{Version: "v1", Kind: "ConfigMapList"},
	{Version: "v1", Kind: "EventList"},
}

func objectsPerCluster(ctx context.Context, c client.Client, ns string, clusters int) map[string]float64 {
	out := map[string]float64{}
	for _, gvk := range countedKinds {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(gvk)
		if err := c.List(ctx, l, client.InNamespace(ns)); err != nil {
			continue
		}
		out[strings.TrimSuffix(gvk.Kind, "List")] = float64(len(l.Items)) / float64(clusters)
	}
	return out
}

// Table prints a result for people.
func (r *Result) Table(w io.Writer) {
	fmt.Fprintf(w, "Scale run: %d clusters x (1 control plane + %d workers) = %d Machines, delays %s\n", r.Clusters, r.Workers, r.Machines, r.Delays)
	fmt.Fprintf(w, "  Running:               %d/%d\n", r.Running, r.Machines)
	fmt.Fprintf(w, "  time to 50/90/100%%:    %.1fs / %.1fs / %.1fs\n", r.To50, r.To90, r.To100)
	fmt.Fprintf(w, "  API requests:          %.0f\n", r.Requests)
	fmt.Fprintf(w, "  API writes:            %.0f (%.1f per Machine; %.1f by controllers, without the %.0f creates of the benchmark)\n", r.Writes, r.WritesPerMachine, r.ControllerWritesPerMachine, r.BenchWrites)
	if r.Topology {
		fmt.Fprintf(w, "  topology applies:      %.1f per Machine (managed topologies of one ClusterClass)\n", r.TopologyAppliesPerMachine)
	}
	fmt.Fprintf(w, "  409 conflicts:         %.0f (%.2f%% of writes)\n", r.Conflicts, r.ConflictPercent)
	fmt.Fprintf(w, "  manager CPU:           %.1fs\n", r.ManagerCPUSeconds)
	fmt.Fprintf(w, "  manager peak RSS:      %.0f MiB\n", r.ManagerPeakRSSMiB)
	if r.PlanePeakRSSMiB > 0 {
		fmt.Fprintf(w, "  API server + etcd:     CPU %.1fs, peak RSS %.0f MiB\n", r.PlaneCPUSeconds, r.PlanePeakRSSMiB)
	}
	fmt.Fprintf(w, "  keys generated:        %.1f per cluster (%s, %.3fs each on one CPU; all of them take at least %.1fs on %d CPUs)\n",
		r.KeysPerCluster, r.KeyAlgorithm, r.KeySeconds, r.KeyFloorSeconds, r.CPUs)
	fmt.Fprintln(w, "  writes per Machine by verb and resource:")
	for _, k := range byCount(r.WritesByVerbResource) {
		c := ""
		if n := r.ConflictsByVerbResource[k]; n > 0 {
			c = fmt.Sprintf("  (%.0f conflicts)", n)
		}
		fmt.Fprintf(w, "    %-48s %6.2f%s\n", k, r.WritesByVerbResource[k]/float64(r.Machines), c)
	}
	fmt.Fprintln(w, "  reads per Machine, the most frequent:")
	for i, k := range byCount(r.ReadsByVerbResource) {
		if i == 5 {
			break
		}
		fmt.Fprintf(w, "    %-48s %6.2f\n", k, r.ReadsByVerbResource[k]/float64(r.Machines))
	}
	fmt.Fprintln(w, "  objects per cluster:")
	kinds := make([]string, 0, len(r.ObjectsPerCluster))
	for k := range r.ObjectsPerCluster {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		fmt.Fprintf(w, "    %-24s %6.2f\n", k, r.ObjectsPerCluster[k])
	}
}

// byCount is m's keys, the largest count first.
func byCount(m map[string]float64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if m[keys[i]] != m[keys[j]] {
			return m[keys[i]] > m[keys[j]]
		}
		return keys[i] < keys[j]
	})
	return keys
}

// kubernetesVersion is the embedded Kubernetes version, or v1.35.8 in a
// build without version stamping (go run, go test).
func kubernetesVersion() string {
	v := version.Kubernetes()
	if !semver.MatchString(v) {
		return "v1.35.8"
	}
	return v
}

var semver = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+$`)

// notRunning says, for up to n Machines that are not Running, what their
// conditions say.
func notRunning(machines []clusterv1.Machine, n int) string {
	var b strings.Builder
	for _, m := range machines {
		if m.Status.Phase == string(clusterv1.MachinePhaseRunning) {
			continue
		}
		if n--; n < 0 {
			break
		}
		fmt.Fprintf(&b, "\n  Machine %s is %s", m.Name, m.Status.Phase)
		for _, c := range m.Status.Conditions {
			if c.Status != "True" && c.Message != "" {
				fmt.Fprintf(&b, "; %s: %s", c.Type, c.Message)
			}
		}
	}
	return b.String()
}
