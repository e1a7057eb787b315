package workload_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"capstan.dev/capstan/internal/workload"
	"capstan.dev/capstan/test/fixture"
)

// nodeName makes a Node name unique to the test.
func nodeName(ns string) string { return "node-" + ns }

func TestGetClientReadsAndWritesWorkloadCluster(t *testing.T) {
	ctx := context.Background()
	ns := mgmt.Namespace(t)
	key := client.ObjectKey{Namespace: ns, Name: "c1"}
	putKubeconfig(t, key, kubeconfigData(kubeconfig(t, wl, "")))
	name := nodeName(ns)
	newNode(t, name)
	cc := startCache(t, workload.Options{})

	c, err := cc.GetClient(ctx, key)
	if err != nil {
		t.Fatalf("GetClient: %v", err)
	}
	node := &corev1.Node{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
		t.Fatalf("reading the Node through the workload client: %v", err)
	}
	nodes := &corev1.NodeList{}
	if err := c.List(ctx, nodes); err != nil {
		t.Fatalf("listing Nodes: %v", err)
	}
	if !containsNode(nodes, name) {
		t.Errorf("Node %s missing from the list", name)
	}
	// Writes go to the workload cluster, not the management cluster.
	patch := client.MergeFrom(node.DeepCopy())
	node.Labels = map[string]string{"capstan.dev/test": "patched"}
	if err := c.Patch(ctx, node, patch); err != nil {
		t.Fatalf("patching the Node: %v", err)
	}
	direct := &corev1.Node{}
	if err := wl.Client.Get(ctx, client.ObjectKey{Name: name}, direct); err != nil || direct.Labels["capstan.dev/test"] != "patched" {
		t.Errorf("patch not visible in the workload cluster: %v %v", err, direct.Labels)
	}

	// The same client is reused, also by concurrent callers.
	var wg sync.WaitGroup
	clients := make([]client.Client, 16)
	for i := range clients {
		wg.Go(func() {
			cl, err := cc.GetClient(ctx, key)
			if err != nil {
				t.Errorf("concurrent GetClient: %v", err)
			}
			clients[i] = cl
		})
	}
	wg.Wait()
	for i, cl := range clients {
		if cl != c {
			t.Fatalf("GetClient call %d returned a different client", i)
		}
	}

	// The uncached reader does field-selector lists.
	r, err := cc.GetReader(ctx, key)
	if err != nil {
		t.Fatalf("GetReader: %v", err)
	}
	pods := &corev1.PodList{}
	if err := r.List(ctx, pods, client.MatchingFields{"spec.nodeName": name}); err != nil {
		t.Fatalf("listing Pods by spec.nodeName: %v", err)
	}
	cfg, err := cc.GetRESTConfig(ctx, key)
	if err != nil || !strings.Contains(cfg.UserAgent, "capstan") {
		t.Errorf("GetRESTConfig = %v, %v; want a config with a Capstan user agent", cfg, err)
	}

	h := cc.Health(key)
	if !h.Connected || h.LastProbeSuccessTime.IsZero() || h.Message != "" {
		t.Errorf("Health = %+v, want connected with a successful probe", h)
	}
	fixture.Eventually(t, "a periodic probe has run", 10*time.Second, func(context.Context) string {
		return fixture.Unless(cc.Health(key).LastProbeTime.After(h.LastProbeTime), "")
	})
	if h := cc.Health(client.ObjectKey{Namespace: ns, Name: "never-asked"}); h.Connected || h.Message == "" {
		t.Errorf("Health of an unknown cluster = %+v, want not connected with a message", h)
	}
}

func containsNode(list *corev1.NodeList, name string) bool {
	for _, n := range list.Items {
		if n.Name == name {
			return true
		}
	}
	return false
}

func TestWatchDeliversNodeEvents(t *testing.T) {
	ctx := context.Background()
	ns := mgmt.Namespace(t)
	key := client.ObjectKey{Namespace: ns, Name: "c1"}
	putKubeconfig(t, key, kubeconfigData(kubeconfig(t, wl, "")))
	cc := startCache(t, workload.Options{})
	name := nodeName(ns)

	events := make(chan string, 100)
	record := handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			events <- "create " + e.Object.GetName()
		},
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			events <- "update " + e.ObjectNew.GetName() + " step=" + e.ObjectNew.GetLabels()["step"]
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			events <- "delete " + e.Object.GetName()
		},
	}
	onlyOurs := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetName() == name })
	recorder := newQueueWatcher(t)
	in := workload.WatchInput{Name: "test/record", Watcher: recorder, Kind: &corev1.Node{}, Handler: record, Predicates: []predicate.Predicate{onlyOurs}}
	if err := cc.Watch(ctx, key, in); err != nil {
		t.Fatalf("Watch: %v", err)
	}
	// Node → Machine, as the Machine controller maps them.
	machines := newQueueWatcher(t)
	toMachine := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ns, Name: "machine-of-" + o.GetName()}}}
	})
	if err := cc.Watch(ctx, key, workload.WatchInput{Name: "test/machines", Watcher: machines, Kind: &corev1.Node{}, Handler: toMachine}); err != nil {
		t.Fatalf("Watch: %v", err)
	}
	// Watching again under the same name starts nothing.
	for range 3 {
		if err := cc.Watch(ctx, key, in); err != nil {
			t.Fatalf("repeated Watch: %v", err)
		}
	}
	if n := recorder.calls.Load(); n != 1 {
		t.Errorf("the watcher was given %d sources, want 1", n)
	}

	newNode(t, name)
	expectEvent(t, events, "create "+name)
	machines.waitForRequest(t, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "machine-of-" + name}})

	node := &corev1.Node{}
	if err := wl.Client.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
		t.Fatal(err)
	}
	node.Labels = map[string]string{"step": "1"}
	if err := wl.Client.Update(ctx, node); err != nil {
		t.Fatal(err)
	}
	expectEvent(t, events, "update "+name+" step=1")

	// Nodes are now read from the cache, which catches up with the update.
	c, err := cc.GetClient(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, "the cached Node has the label", 10*time.Second, func(context.Context) string {
		n := &corev1.Node{}
		return fixture.Unless(c.Get(ctx, client.ObjectKey{Name: name}, n) == nil && n.Labels["step"] == "1", "")
	})

	if err := wl.Client.Delete(ctx, node); err != nil {
		t.Fatal(err)
	}
	expectEvent(t, events, "delete "+name)

	// Bad input is refused before anything starts.
	if err := cc.Watch(ctx, key, workload.WatchInput{Name: "x", Watcher: recorder, Kind: &corev1.Node{}}); err == nil {
		t.Error("Watch without a handler succeeded")
	}
	if err := cc.Watch(ctx, key, workload.WatchInput{Name: "x", Watcher: recorder, Kind: &unknownKind{}, Handler: record}); err == nil {
		t.Error("Watch of a kind missing from the scheme succeeded")
	}
}

// unknownKind is a type no scheme knows.
type unknownKind struct{ corev1.ConfigMap }

func expectEvent(t testing.TB, events <-chan string, want string) {
	t.Helper()
	timeout := time.After(20 * time.Second)
	var seen []string
	for {
		select {
		case got := <-events:
			if got == want {
				return
			}
			seen = append(seen, got)
		case <-timeout:
			t.Fatalf("event %q not delivered; saw %q", want, seen)
		}
	}
}

func TestMissingOrInvalidKubeconfigIsTypedError(t *testing.T) {
	ctx := context.Background()
	ns := mgmt.Namespace(t)
	key := client.ObjectKey{Namespace: ns, Name: "pending"}
	cc := startCache(t, workload.Options{RetryInterval: time.Hour})

	_, err := cc.GetClient(ctx, key)
	if !errors.Is(err, workload.ErrClusterNotConnected) || workload.ReasonOf(err) != workload.ReasonKubeconfigMissing {
		t.Fatalf("GetClient without a Secret = %v, want ErrClusterNotConnected (%s)", err, workload.ReasonKubeconfigMissing)
	}
	if msg := err.Error(); !strings.Contains(msg, ns+"/pending-kubeconfig") || !strings.Contains(msg, `"value"`) {
		t.Errorf("message %q should name the Secret and its key", msg)
	}
	if err := cc.Watch(ctx, key, workload.WatchInput{Name: "w", Watcher: newQueueWatcher(t), Kind: &corev1.Node{}, Handler: &handler.EnqueueRequestForObject{}}); !errors.Is(err, workload.ErrClusterNotConnected) {
		t.Errorf("Watch without a Secret = %v, want ErrClusterNotConnected", err)
	}
	if _, err := cc.GetReader(ctx, key); !errors.Is(err, workload.ErrClusterNotConnected) {
		t.Errorf("GetReader without a Secret = %v, want ErrClusterNotConnected", err)
	}
	if h := cc.Health(key); h.Connected || !strings.Contains(h.Message, "does not exist") {
		t.Errorf("Health = %+v, want not connected, saying the Secret does not exist", h)
	}

	putKubeconfig(t, key, map[string][]byte{"kubeconfig": []byte("x")})
	if _, err := cc.GetClient(ctx, key); workload.ReasonOf(err) != workload.ReasonKubeconfigInvalid || !strings.Contains(err.Error(), `no "value" key`) {
		t.Errorf("GetClient with the wrong key = %v, want %s naming the key", err, workload.ReasonKubeconfigInvalid)
	}
	putKubeconfig(t, key, kubeconfigData([]byte("this: is: not: a kubeconfig")))
	_, err = cc.GetClient(ctx, key)
	if workload.ReasonOf(err) != workload.ReasonKubeconfigInvalid || !errors.Is(err, workload.ErrClusterNotConnected) {
		t.Errorf("GetClient with garbage = %v, want %s", err, workload.ReasonKubeconfigInvalid)
	}

	// Fixing the Secret is noticed at once, even though RetryInterval is long.
	putKubeconfig(t, key, kubeconfigData(kubeconfig(t, wl, "")))
	if _, err := cc.GetClient(ctx, key); err != nil {
		t.Fatalf("GetClient after the Secret was fixed: %v", err)
	}

	// An unreachable server is reported as such, and not retried before
	// RetryInterval.
	dead := fixture.NewProxy(t, apiServerAddr(t, wl))
	dead.Cut()
	other := client.ObjectKey{Namespace: ns, Name: "unreachable"}
	putKubeconfig(t, other, kubeconfigData(kubeconfig(t, wl, dead.URL())))
	_, err = cc.GetClient(ctx, other)
	if workload.ReasonOf(err) != workload.ReasonUnreachable || !strings.Contains(err.Error(), dead.Addr()) {
		t.Fatalf("GetClient of an unreachable cluster = %v, want %s naming the address", err, workload.ReasonUnreachable)
	}
	if _, err := cc.GetClient(ctx, other); workload.ReasonOf(err) != workload.ReasonUnreachable {
		t.Errorf("GetClient within RetryInterval = %v, want the previous error again", err)
	}
	// RetryInterval (an hour here) does not hold back a cluster that
	// answers again: the probe loop notices it at its next round.
	dead.Restore(t)
	fixture.Eventually(t, "GetClient connects once the cluster answers", 10*time.Second, func(context.Context) string {
		_, err := cc.GetClient(ctx, other)
		return fixture.Unless(err == nil, fmt.Sprint(err))
	})
	dead.Cut()

	// A server that accepts connections and never answers costs at most
	// ProbeTimeout (1s here), not a hung reconcile.
	hole := listen(t, func(net.Conn) {}) // holds each connection open, unanswered
	silent := client.ObjectKey{Namespace: ns, Name: "silent"}
	putKubeconfig(t, silent, kubeconfigData(kubeconfig(t, wl, "https://"+hole)))
	start := time.Now()
	_, err = cc.GetClient(ctx, silent)
	if workload.ReasonOf(err) != workload.ReasonUnreachable {
		t.Errorf("GetClient of a silent server = %v, want %s", err, workload.ReasonUnreachable)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("GetClient of a silent server took %s, want about ProbeTimeout", d)
	}
}

func TestKubeconfigRotationRebuildsConnection(t *testing.T) {
	ctx := context.Background()
	ns := mgmt.Namespace(t)
	key := client.ObjectKey{Namespace: ns, Name: "c1"}
	putKubeconfig(t, key, kubeconfigData(kubeconfig(t, wl, "")))
	name := nodeName(ns)
	newNode(t, name)
	cc := startCache(t, workload.Options{})

	c1, err := cc.GetClient(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	w := newQueueWatcher(t)
	in := workload.WatchInput{Name: "nodes", Watcher: w, Kind: &corev1.Node{}, Handler: &handler.EnqueueRequestForObject{}}
	if err := cc.Watch(ctx, key, in); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, "the cache serves the Node", 10*time.Second, func(context.Context) string {
		return fixture.Unless(c1.Get(ctx, client.ObjectKey{Name: name}, &corev1.Node{}) == nil, "")
	})

	// Metadata-only changes to the Secret keep the connection.
	s := &corev1.Secret{}
	if err := mgmt.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "c1-kubeconfig"}, s); err != nil {
		t.Fatal(err)
	}
	s.Labels = map[string]string{"touched": "yes"}
	if err := mgmt.Client.Update(ctx, s); err != nil {
		t.Fatal(err)
	}
	if c, err := cc.GetClient(ctx, key); err != nil || c != c1 {
		t.Fatalf("GetClient after a label change = %v, %v; want the same client", c, err)
	}

	// New kubeconfig data (here: another address for the same server).
	p := fixture.NewProxy(t, apiServerAddr(t, wl))
	putKubeconfig(t, key, kubeconfigData(kubeconfig(t, wl, p.URL())))
	c2, err := cc.GetClient(ctx, key)
	if err != nil {
		t.Fatalf("GetClient after rotation: %v", err)
	}
	if c2 == c1 {
		t.Fatal("GetClient returned the old client after the kubeconfig changed")
	}
	if err := c2.Get(ctx, client.ObjectKey{Name: name}, &corev1.Node{}); err != nil {
		t.Fatalf("reading through the new client: %v", err)
	}
	if p.Accepted() == 0 {
		t.Error("the new client does not use the new kubeconfig's server")
	}
	if !cc.Health(key).Connected {
		t.Errorf("Health after rotation = %+v", cc.Health(key))
	}
	// The old connection's cache is closed: its cached reads fail fast.
	if err := c1.Get(ctx, client.ObjectKey{Name: name}, &corev1.Node{}); workload.ReasonOf(err) != workload.ReasonDisconnected {
		t.Errorf("cached read through the old client = %v, want %s", err, workload.ReasonDisconnected)
	}
	// Watches went with the old connection; the next Watch re-creates them.
	if err := cc.Watch(ctx, key, in); err != nil {
		t.Fatal(err)
	}
	if n := w.calls.Load(); n != 2 {
		t.Errorf("watcher got %d sources, want 2 (one per connection)", n)
	}
}

func TestProbeFailuresDisconnectAndNextUseReconnects(t *testing.T) {
	ctx := context.Background()
	ns := mgmt.Namespace(t)
	key := client.ObjectKey{Namespace: ns, Name: "flaky"}
	p := fixture.NewProxy(t, apiServerAddr(t, wl))
	putKubeconfig(t, key, kubeconfigData(kubeconfig(t, wl, p.URL())))
	name := nodeName(ns)
	newNode(t, name)
	cc := startCache(t, workload.Options{ProbeInterval: 150 * time.Millisecond, FailureThreshold: 3})
	changes := cc.HealthChanges()

	c, err := cc.GetClient(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	waitForHealthEvent(t, changes, key) // connected
	if err := cc.Watch(ctx, key, workload.WatchInput{Name: "nodes", Watcher: newQueueWatcher(t), Kind: &corev1.Node{}, Handler: &handler.EnqueueRequestForObject{}}); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, "the cache serves the Node", 10*time.Second, func(context.Context) string {
		return fixture.Unless(c.Get(ctx, client.ObjectKey{Name: name}, &corev1.Node{}) == nil, "")
	})

	p.Cut()
	// Until the threshold, a client already handed out still reads watched
	// kinds from the cache...
	if err := c.Get(ctx, client.ObjectKey{Name: name}, &corev1.Node{}); err != nil {
		t.Errorf("cached read right after the server vanished: %v", err)
	}
	// ...but from the first failed probe on, the cache hands out no client
	// whose reads would pass the silent cluster's last words for its
	// present state, says why (the connection error, not client-go's rate
	// limiter), and tells the controllers.
	waitForHealthEvent(t, changes, key) // stopped answering
	if h := cc.Health(key); !h.Connected || h.ConsecutiveFailures == 0 {
		t.Errorf("Health after the first failed probe = %+v, want connected with failures", h)
	}
	_, err = cc.GetClient(ctx, key)
	if workload.ReasonOf(err) != workload.ReasonUnreachable || !strings.Contains(err.Error(), "connection refused") || strings.Contains(err.Error(), "rate limiter") {
		t.Errorf("GetClient after a failed probe = %v, want %s naming the refused connection", err, workload.ReasonUnreachable)
	}
	fixture.Eventually(t, "disconnected after 3 failed probes", 10*time.Second, func(context.Context) string {
		h := cc.Health(key)
		return fixture.Unless(!h.Connected, fmt.Sprintf("%+v", h))
	})
	waitForHealthEvent(t, changes, key) // disconnected
	h := cc.Health(key)
	if h.Connected || h.ConsecutiveFailures < 3 || !strings.Contains(h.Message, "3 consecutive failed health probes") {
		t.Fatalf("Health after the server vanished = %+v", h)
	}
	if !h.LastProbeTime.After(h.LastProbeSuccessTime) {
		t.Errorf("LastProbeTime %v should be after LastProbeSuccessTime %v", h.LastProbeTime, h.LastProbeSuccessTime)
	}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, &corev1.Node{}); workload.ReasonOf(err) != workload.ReasonDisconnected {
		t.Errorf("cached read after disconnect = %v, want %s", err, workload.ReasonDisconnected)
	}
	if _, err := cc.GetClient(ctx, key); workload.ReasonOf(err) != workload.ReasonUnreachable {
		t.Errorf("GetClient while unreachable = %v, want %s", err, workload.ReasonUnreachable)
	}

	p.Restore(t)
	// The probe loop notices the answer and says so, without anyone
	// asking for a client.
	waitForHealthEvent(t, changes, key) // answers again
	c2, err := cc.GetClient(ctx, key)
	if err != nil {
		t.Fatalf("GetClient once the cluster answers again: %v", err)
	}
	if h := cc.Health(key); !h.Connected || h.ConsecutiveFailures != 0 {
		t.Errorf("Health after reconnecting = %+v", h)
	}
	if err := c2.Get(ctx, client.ObjectKey{Name: name}, &corev1.Node{}); err != nil {
		t.Errorf("read after reconnecting: %v", err)
	}
}

// baseline is the goroutine count once the previous tests' leftovers have
// wound down a little.
func baseline() int {
	time.Sleep(500 * time.Millisecond)
	runtime.GC()
	return runtime.NumGoroutine()
}

// settle waits for the goroutine count to drop to at most limit.
func settle(limit int) int {
	var n int
	for range 200 {
		runtime.GC()
		if n = runtime.NumGoroutine(); n <= limit {
			return n
		}
		time.Sleep(50 * time.Millisecond)
	}
	return n
}

const goroutineTolerance = 4

func TestDisconnectStopsEverything(t *testing.T) {
	ctx := context.Background()
	ns := mgmt.Namespace(t)
	key := client.ObjectKey{Namespace: ns, Name: "doomed"}
	putKubeconfig(t, key, kubeconfigData(kubeconfig(t, wl, "")))
	name := nodeName(ns)
	newNode(t, name)
	cc := startCache(t, workload.Options{ProbeInterval: time.Hour})
	w := newQueueWatcher(t)

	cycle := func() client.Client {
		c, err := cc.GetClient(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if err := cc.Watch(ctx, key, workload.WatchInput{Name: "nodes", Watcher: w, Kind: &corev1.Node{}, Handler: &handler.EnqueueRequestForObject{}}); err != nil {
			t.Fatal(err)
		}
		w.waitForRequest(t, reconcile.Request{NamespacedName: types.NamespacedName{Name: name}})
		if err := c.Get(ctx, client.ObjectKey{Name: name}, &corev1.Node{}); err != nil {
			t.Fatal(err)
		}
		return c
	}
	// A first round warms up whatever client-go starts once per process.
	cycle()
	cc.Disconnect(key)

	before := baseline()
	c := cycle()
	during := runtime.NumGoroutine()
	cc.Disconnect(key)
	after := settle(before + goroutineTolerance)
	t.Logf("goroutines: %d before connecting, %d connected and watching, %d after Disconnect", before, during, after)
	if after > before+goroutineTolerance {
		t.Errorf("%d goroutines left after Disconnect (%d before)", after-before, before)
	}
	if h := cc.Health(key); h.Connected {
		t.Errorf("Health after Disconnect = %+v", h)
	}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, &corev1.Node{}); !errors.Is(err, workload.ErrClusterNotConnected) {
		t.Errorf("cached read after Disconnect = %v, want ErrClusterNotConnected", err)
	}
	cc.Disconnect(key) // twice is fine
}

func TestStopClosesAllClusters(t *testing.T) {
	ctx := context.Background()
	ns := mgmt.Namespace(t)
	keys := []client.ObjectKey{{Namespace: ns, Name: "a"}, {Namespace: ns, Name: "b"}}
	for _, k := range keys {
		putKubeconfig(t, k, kubeconfigData(kubeconfig(t, wl, "")))
	}
	before := baseline()

	cc, err := workload.New(mgmt.Client, workload.Options{Scheme: mgmt.Scheme, ProbeInterval: 50 * time.Millisecond, Logger: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- cc.Start(runCtx) }()
	changes := cc.HealthChanges()
	w := newQueueWatcher(t)
	for _, k := range keys {
		if _, err := cc.GetClient(ctx, k); err != nil {
			t.Fatal(err)
		}
		if err := cc.Watch(ctx, k, workload.WatchInput{Name: "nodes", Watcher: w, Kind: &corev1.Node{}, Handler: &handler.EnqueueRequestForObject{}}); err != nil {
			t.Fatal(err)
		}
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("Start: %v", err)
	}
	for range changes { // drained and closed on stop
	}
	if _, err := cc.GetClient(ctx, keys[0]); workload.ReasonOf(err) != workload.ReasonStopped {
		t.Errorf("GetClient after stop = %v, want %s", err, workload.ReasonStopped)
	}
	w.queue.ShutDown()
	after := settle(before + goroutineTolerance)
	t.Logf("goroutines: %d before, %d after Start returned", before, after)
	if after > before+goroutineTolerance {
		t.Errorf("%d goroutines left after Start returned", after-before)
	}
}

// TestWorkloadPlaneStopped stops the workload plane for real, so it runs
// last (tests run in source order; the Example uses the management plane).
func TestWorkloadPlaneStopped(t *testing.T) {
	ctx := context.Background()
	ns := mgmt.Namespace(t)
	key := client.ObjectKey{Namespace: ns, Name: "c1"}
	putKubeconfig(t, key, kubeconfigData(kubeconfig(t, wl, "")))
	cc := startCache(t, workload.Options{ProbeInterval: 100 * time.Millisecond, FailureThreshold: 3})
	changes := cc.HealthChanges()
	if _, err := cc.GetClient(ctx, key); err != nil {
		t.Fatal(err)
	}
	waitForHealthEvent(t, changes, key)
	if err := cc.Watch(ctx, key, workload.WatchInput{Name: "nodes", Watcher: newQueueWatcher(t), Kind: &corev1.Node{}, Handler: &handler.EnqueueRequestForObject{}}); err != nil {
		t.Fatal(err)
	}

	stopping := time.Now()
	wl.Stop()
	wl.Client = nil
	waitForHealthEvent(t, changes, key)
	h := cc.Health(key)
	t.Logf("disconnected %s after the plane began stopping: %s", time.Since(stopping).Round(time.Millisecond), h.Message)
	if h.Connected || h.ConsecutiveFailures < 3 {
		t.Fatalf("Health after the workload plane stopped = %+v", h)
	}
	if _, err := cc.GetClient(ctx, key); !errors.Is(err, workload.ErrClusterNotConnected) || workload.ReasonOf(err) != workload.ReasonUnreachable {
		t.Errorf("GetClient after the plane stopped = %v, want ErrClusterNotConnected (%s)", err, workload.ReasonUnreachable)
	}
}
