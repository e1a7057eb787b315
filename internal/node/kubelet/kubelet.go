package kubelet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// Well-known names the simulated kubelet writes.
const (
	// NodeLeaseNamespace holds one Lease per node, renewed as its heartbeat.
	NodeLeaseNamespace = "kube-node-lease"
	// MirrorPodNamespace holds the mirror pods of static pods.
	MirrorPodNamespace = "kube-system"

	annotationConfigMirror = "kubernetes.io/config.mirror"
	annotationConfigSource = "kubernetes.io/config.source"
	annotationConfigHash   = "kubernetes.io/config.hash"
)

// DefaultHeartbeatInterval is the Lease renewal period when
// Options.HeartbeatInterval is zero, the kubelet's own default.
const DefaultHeartbeatInterval = 10 * time.Second

// statusEvery is how many heartbeat intervals may pass between two Node
// status writes when nothing changed: the Lease says the node is alive, the
// conditions' heartbeat only needs to stay reasonably fresh.
const statusEvery = 4

// StaticPod is a control-plane component the machine runs "as a static
// pod": it is shown in the cluster as a mirror Pod.
type StaticPod struct {
	// Component is kube-apiserver, kube-controller-manager, kube-scheduler
	// or etcd; the mirror Pod is named <Component>-<NodeName>.
	Component string
	// Annotations are copied onto the mirror Pod, for example
	// kubeadm.kubernetes.io/etcd.advertise-client-urls.
	Annotations map[string]string
	// Healthy reports the component's health (nil error = healthy); it is
	// called every heartbeat and decides the mirror Pod's Ready condition.
	// A nil Healthy means always healthy.
	Healthy func(ctx context.Context) error
	// Image is the mirror Pod's container image; empty means
	// registry.k8s.io/<Component>:<KubeletVersion>.
	Image string
	// Ports maps ports of the Pod, as a port-forward names them (etcd's
	// 2379), to the host address where the component listens. A static
	// Pod shares the host's network, but on a local machine every
	// component listens on a port of its own, not on the well-known one.
	// Only these ports can be forwarded to.
	Ports map[int32]string
}

// Options configure Run.
type Options struct {
	// Config carries the node's credentials: user system:node:<NodeName>,
	// group system:nodes.
	Config *rest.Config
	// LabelsClient, when set, carries credentials allowed to set the labels
	// a node may not set on itself (node-role.kubernetes.io/... and other
	// kubernetes.io/k8s.io labels outside the kubelet's set); typically the
	// machine's admin kubeconfig, as kubeadm uses to mark control-plane
	// nodes. It is used for nothing else.
	LabelsClient *rest.Config

	NodeName       string
	ProviderID     string
	KubeletVersion string
	// Address is the node's InternalIP, normally "127.0.0.1".
	Address string
	// Labels are set when the Node is first registered.
	Labels map[string]string
	// Taints are set when the Node is first registered (kubeadm's
	// nodeRegistration.taints).
	Taints     []corev1.Taint
	StaticPods []StaticPod
	// OnLeave runs when the Node is asked to leave the load balancer; the
	// node answers once it returns nil.
	OnLeave func(ctx context.Context) error
	// RootDir is the machine's "/". When set, the one Pod that may run for
	// real, Capstan's own manager for LocalDir (deploy.CheckLocalManagerPod),
	// runs as a process of Executable under RootDir/var/lib/kubelet/pods/<uid>/;
	// any other Pod of Capstan's image is refused (its status says why),
	// and Pods of other images are only reported as running.
	RootDir string
	// LocalDir is the local provider's directory this machine is one of
	// (<LocalDir>/<namespace>/<cluster>/machines/<name>): the only
	// --local-dir the manager Pod may be given. Empty refuses every Pod of
	// Capstan's image.
	LocalDir string
	// Executable runs the manager Pod's container with its arguments
	// (default: this process's own executable, the capstan binary the image
	// would hold).
	Executable string
	// HeartbeatInterval is the Lease renewal period (default 10s).
	HeartbeatInterval time.Duration
	// Server, when set, makes the kubelet serve its API on Address, so
	// that the API server can forward ports of the static Pods (see
	// ServerOptions). Without it the Node reports the kubelet's usual port
	// 10250 and nothing listens there.
	Server *ServerOptions
	Log    logr.Logger

	// servingPort is the kubelet API's port once bound.
	servingPort int32
}

// kubelet is one Run.
type kubelet struct {
	o      Options
	log    logr.Logger
	client kubernetes.Interface
	// labels applies restricted labels; it is client when no LabelsClient
	// was given.
	labels kubernetes.Interface

	nodeUID types.UID
	// pendingLabels are restricted labels not yet on the Node; guarded by mu.
	mu            sync.Mutex
	pendingLabels map[string]string

	nodes    corelisters.NodeLister
	pods     cache.Indexer
	queue    workqueue.TypedRateLimitingInterface[string]
	ips      *ipAllocator
	podCIDR  string
	statusCh chan struct{} // wakes the status loop (Node or mirror pod changed)
	leaveCh  chan struct{} // wakes the leave loop (Node changed)

	health *healthBook
	lease  *leaseKeeper

	exe   string
	procs *processes

	// listener is the kubelet API's (nil without Options.Server).
	listener   net.Listener
	authzMu    sync.Mutex
	authzCache map[string]authzDecision
}

// Run registers the node and keeps it alive until ctx ends; see the package
// documentation. It returns nil when ctx ends, or an error when the options
// are unusable or the Node name belongs to another machine.
func Run(ctx context.Context, o Options) error {
	if err := o.validate(); err != nil {
		return err
	}
	o.defaults()
	k, err := newKubelet(o)
	if err != nil {
		return err
	}
	return k.run(ctx)
}

func (o *Options) validate() error {
	var errs []error
	if o.Config == nil {
		errs = append(errs, errors.New("kubelet: Options.Config is nil: pass the node's client configuration (from Bootstrap)"))
	}
	if o.NodeName == "" {
		errs = append(errs, errors.New("kubelet: Options.NodeName is empty"))
	}
	seen := map[string]bool{}
	for i, sp := range o.StaticPods {
		switch {
		case sp.Component == "":
			errs = append(errs, fmt.Errorf("kubelet: Options.StaticPods[%d].Component is empty", i))
		case seen[sp.Component]:
			errs = append(errs, fmt.Errorf("kubelet: Options.StaticPods[%d].Component %q is listed twice", i, sp.Component))
		}
		seen[sp.Component] = true
	}
	if o.Server != nil {
		if o.Server.ClientCAs == nil {
			errs = append(errs, errors.New("kubelet: Options.Server.ClientCAs is nil: the kubelet API could authenticate nobody"))
		}
		if len(o.Server.Certificate.Certificate) == 0 {
			errs = append(errs, errors.New("kubelet: Options.Server.Certificate is empty: the kubelet API needs a serving certificate"))
		}
	}
	if o.HeartbeatInterval < 0 {
		errs = append(errs, fmt.Errorf("kubelet: Options.HeartbeatInterval %s is negative", o.HeartbeatInterval))
	}
	return errors.Join(errs...)
}

func (o *Options) defaults() {
	if o.HeartbeatInterval == 0 {
		o.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if o.Address == "" {
		o.Address = "127.0.0.1"
	}
	if o.Log.GetSink() == nil {
		o.Log = logr.Discard()
	}
}

func newKubelet(o Options) (*kubelet, error) {
	client, err := newClient(o.Config, "capstan-kubelet")
	if err != nil {
		return nil, fmt.Errorf("kubelet: Options.Config: %w", err)
	}
	labels := client
	if o.LabelsClient != nil {
		if labels, err = newClient(o.LabelsClient, "capstan-kubelet-labels"); err != nil {
			return nil, fmt.Errorf("kubelet: Options.LabelsClient: %w", err)
		}
	}
	cidr, base := nodePodCIDR(o.NodeName)
	exe := o.Executable
	if exe == "" && o.RootDir != "" {
		if exe, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("kubelet: finding this executable to run Capstan's pods with: %w", err)
		}
	}
	k := &kubelet{
		o:       o,
		log:     o.Log.WithValues("node", o.NodeName),
		client:  client,
		labels:  labels,
		ips:     newIPAllocator(base),
		podCIDR: cidr,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "kubelet-pods"}),
		statusCh:   make(chan struct{}, 1),
		leaveCh:    make(chan struct{}, 1),
		health:     newHealthBook(),
		exe:        exe,
		authzCache: map[string]authzDecision{},
	}
	k.procs = &processes{k: k, pods: map[types.UID]*processPod{}}
	return k, nil
}

// newClient copies cfg so the caller's configuration is never modified, and
// gives it a rate limit fit for a node: a kubelet's default QPS of 5 would
// delay pod start-up when many pods arrive at once.
func newClient(cfg *rest.Config, agent string) (kubernetes.Interface, error) {
	c := rest.CopyConfig(cfg)
	if c.QPS == 0 {
		c.QPS, c.Burst = 50, 100
	}
	if c.UserAgent == "" {
		c.UserAgent = agent
	}
	return kubernetes.NewForConfig(c)
}

func (k *kubelet) run(ctx context.Context) error {
	defer k.queue.ShutDown()
	if err := k.listen(); err != nil {
		return err
	}
	if k.listener != nil {
		defer k.listener.Close()
	}
	if err := k.register(ctx); err != nil {
		return err
	}
	k.lease = &leaseKeeper{client: k.client, node: k.o.NodeName, uid: k.nodeUID, duration: leaseDuration(k.o.HeartbeatInterval)}

	// The informers see only this node's objects: the Node by name, Pods by
	// spec.nodeName (which the Node authorizer requires of a node's list).
	nodeInformers := informers.NewSharedInformerFactoryWithOptions(k.client, 0,
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
			lo.FieldSelector = fields.OneTermEqualSelector("metadata.name", k.o.NodeName).String()
		}))
	podInformers := informers.NewSharedInformerFactoryWithOptions(k.client, 0,
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
			lo.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", k.o.NodeName).String()
		}))
	nodeInformer := nodeInformers.Core().V1().Nodes()
	podInformer := podInformers.Core().V1().Pods().Informer()
	k.nodes = nodeInformer.Lister()
	k.pods = podInformer.GetIndexer()
	if _, err := nodeInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { k.nodeChanged() },
		UpdateFunc: func(any, any) { k.nodeChanged() },
		DeleteFunc: func(any) { k.nodeChanged() },
	}); err != nil {
		return err
	}
	if _, err := podInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    k.podEvent,
		UpdateFunc: func(_, obj any) { k.podEvent(obj) },
		DeleteFunc: k.podDeleted,
	}); err != nil {
		return err
	}
	nodeInformers.Start(ctx.Done())
	podInformers.Start(ctx.Done())
	defer nodeInformers.Shutdown()
	defer podInformers.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), nodeInformer.Informer().HasSynced, podInformer.HasSynced) {
		return nil // ctx ended
	}
	// Before any pod gets an address, learn the addresses pods already have
	// (the kubelet may have been restarted).
	for _, obj := range k.pods.List() {
		if pod, ok := obj.(*corev1.Pod); ok {
			k.reserveIP(pod)
		}
	}
	k.log.Info("Node registered; kubelet running", "podCIDR", k.podCIDR)

	var wg sync.WaitGroup
	for _, loop := range []func(context.Context){k.leaseLoop, k.statusLoop, k.leaveLoop, k.podWorker, k.podWorker, k.serve} {
		wg.Add(1)
		go func() { defer wg.Done(); loop(ctx) }()
	}
	<-ctx.Done()
	k.queue.ShutDown()
	wg.Wait()
	// A stopping node stops the processes of its pods, each within its
	// grace period.
	k.procs.stopAll()
	k.log.Info("Kubelet stopped")
	return nil
}

func (k *kubelet) nodeChanged() {
	notify(k.statusCh)
	notify(k.leaveCh)
}

// notify wakes a loop without blocking; wake-ups coalesce.
func notify(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// node returns the Node from the informer's cache.
func (k *kubelet) node() (*corev1.Node, error) {
	return k.nodes.Get(k.o.NodeName)
}

// sleep waits d or until ctx ends; it reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
