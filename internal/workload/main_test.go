package workload_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"capstan.dev/capstan/internal/testenv"
	"capstan.dev/capstan/internal/workload"
)

// mgmt is the management cluster (Secrets live there); wl is the workload
// cluster the Secrets point at. The last test stops wl.
var mgmt, wl *testenv.Env

func TestMain(m *testing.M) {
	if testenv.Fuzzing() { // the fuzz targets need no cluster
		os.Exit(m.Run())
	}
	var wg sync.WaitGroup
	var mgmtErr, wlErr error
	wg.Go(func() { mgmt, mgmtErr = testenv.Start() })
	wg.Go(func() { wl, wlErr = testenv.Start() })
	wg.Wait()
	stop := func() {
		if wl != nil {
			wl.Stop()
		}
		if mgmt != nil {
			mgmt.Stop()
		}
	}
	if err := errors.Join(mgmtErr, wlErr); err != nil {
		stop()
		fmt.Fprintln(os.Stderr, "starting test planes:", err)
		os.Exit(1)
	}
	code := m.Run()
	stop()
	os.Exit(code)
}

// kubeconfig returns the kubeconfig of env, pointed at server when it is not
// empty (a proxy in front of the API server).
func kubeconfig(t testing.TB, env *testenv.Env, server string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(env.StateDir, "kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	if server == "" {
		return data
	}
	cfg, err := clientcmd.Load(data)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cfg.Clusters {
		c.Server = server
	}
	out, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// putKubeconfig creates or replaces the <cluster>-kubeconfig Secret.
func putKubeconfig(t testing.TB, key client.ObjectKey, data map[string][]byte) {
	t.Helper()
	ctx := context.Background()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: workload.KubeconfigSecretName(key.Name)}}
	err := mgmt.Client.Get(ctx, client.ObjectKeyFromObject(s), s)
	switch {
	case apierrors.IsNotFound(err):
		s.Data = data
		err = mgmt.Client.Create(ctx, s)
	case err == nil:
		s.Data = data
		err = mgmt.Client.Update(ctx, s)
	}
	if err != nil {
		t.Fatalf("writing kubeconfig Secret: %v", err)
	}
}

func kubeconfigData(b []byte) map[string][]byte {
	return map[string][]byte{workload.KubeconfigDataKey: b}
}

// startCache runs a ClusterCache with fast probes until the test ends.
func startCache(t testing.TB, opts workload.Options) *workload.ClusterCache {
	t.Helper()
	if opts.Scheme == nil {
		opts.Scheme = mgmt.Scheme
	}
	if opts.Logger.GetSink() == nil {
		opts.Logger = testr.NewWithInterface(t, testr.Options{Verbosity: 1})
	}
	if opts.ProbeInterval == 0 {
		opts.ProbeInterval = 100 * time.Millisecond
	}
	if opts.ProbeTimeout == 0 {
		opts.ProbeTimeout = time.Second
	}
	if opts.RetryInterval == 0 {
		opts.RetryInterval = 200 * time.Millisecond
	}
	if opts.SecretRecheckInterval == 0 {
		// The rotation tests expect a changed Secret to be seen at once.
		opts.SecretRecheckInterval = -1
	}
	cc, err := workload.New(mgmt.Client, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cc.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Start: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("Start did not return 30s after its context ended")
		}
	})
	return cc
}

// newNode creates a Node in the workload plane and deletes it when the test
// ends.
func newNode(t testing.TB, name string) *corev1.Node {
	t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := wl.Client.Create(context.Background(), n); err != nil {
		t.Fatalf("creating Node: %v", err)
	}
	t.Cleanup(func() {
		if wl.Client == nil {
			return
		}
		_ = wl.Client.Delete(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}})
	})
	return n
}

// queueWatcher stands in for a controller: it starts the sources it is given
// with its own queue.
type queueWatcher struct {
	ctx   context.Context
	queue workqueue.TypedRateLimitingInterface[reconcile.Request]
	calls atomic.Int32
}

func newQueueWatcher(t testing.TB) *queueWatcher {
	ctx, cancel := context.WithCancel(context.Background())
	w := &queueWatcher{ctx: ctx, queue: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())}
	t.Cleanup(func() { cancel(); w.queue.ShutDown() })
	return w
}

func (w *queueWatcher) Watch(src source.Source) error {
	w.calls.Add(1)
	return src.Start(w.ctx, w.queue)
}

// waitForRequest takes requests off the queue until want arrives.
func (w *queueWatcher) waitForRequest(t testing.TB, want reconcile.Request) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if w.queue.Len() == 0 {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		got, _ := w.queue.Get()
		w.queue.Done(got)
		w.queue.Forget(got)
		if got == want {
			return
		}
	}
	t.Fatalf("request %s was not enqueued", want)
}

// waitForHealthEvent reads ch until an event for key arrives.
func waitForHealthEvent(t testing.TB, ch <-chan event.GenericEvent, key client.ObjectKey) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatal("health channel closed")
			}
			if client.ObjectKeyFromObject(ev.Object) == key {
				return
			}
		case <-timeout:
			t.Fatalf("no health change event for %s", key)
		}
	}
}

// apiServerAddr is host:port of env's API server.
func apiServerAddr(t testing.TB, env *testenv.Env) string {
	t.Helper()
	cfg, err := clientcmd.Load(kubeconfig(t, env, ""))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cfg.Clusters {
		return c.Server[len("https://"):]
	}
	t.Fatal("kubeconfig has no cluster")
	return ""
}
