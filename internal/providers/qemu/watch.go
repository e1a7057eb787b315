package qemu

import (
	"context"
	"path/filepath"
	"sync"

	"github.com/fsnotify/fsnotify"
	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	qemuv1 "capstan.dev/capstan/api/infrastructure/qemu/v1beta2"
	"capstan.dev/capstan/internal/lockfile"
	"capstan.dev/capstan/internal/providers/qemu/vm"
)

// notifier turns the end of a process (a VM's QEMU, a load balancer) and
// the progress of an image build into reconcile requests, through channels
// that feed the controllers' channel sources, and so does a write to a
// VM's bootstrap report file. One goroutine waits per process or report
// file; none polls.
type notifier struct {
	ctx      context.Context
	log      logr.Logger
	machines chan event.GenericEvent
	clusters chan event.GenericEvent

	mu sync.Mutex
	// waiting holds the VM directories and lock files a goroutine waits on.
	waiting map[string]bool
	// reports is the one inotify instance all report files share, made on
	// first use: one per VM would soon reach the per-user limit of
	// instances (128 by default). reportKeys maps each watched report file
	// to its QEMUMachine.
	reports    *fsnotify.Watcher
	reportKeys map[string]client.ObjectKey
}

func newNotifier(ctx context.Context, log logr.Logger) *notifier {
	return &notifier{
		ctx: ctx, log: log,
		machines: make(chan event.GenericEvent, 1024),
		clusters: make(chan event.GenericEvent, 1024),
		waiting:  map[string]bool{},

		reportKeys: map[string]client.ObjectKey{},
	}
}

func (n *notifier) send(ch chan event.GenericEvent, obj client.Object) {
	select {
	case ch <- event.GenericEvent{Object: obj}:
	case <-n.ctx.Done():
	}
}

func (n *notifier) machine(key client.ObjectKey) {
	n.send(n.machines, &qemuv1.QEMUMachine{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}})
}

// claim marks what as waited on; false when a goroutine already waits.
func (n *notifier) claim(what string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.waiting[what] {
		return false
	}
	n.waiting[what] = true
	return true
}

func (n *notifier) release(what string) {
	n.mu.Lock()
	delete(n.waiting, what)
	n.mu.Unlock()
}

// watchVM wakes the QEMUMachine key once the QEMU process of dir exits.
func (n *notifier) watchVM(dir string, key client.ObjectKey) {
	if !n.claim(dir) {
		return
	}
	exited, err := vm.Exited(n.ctx, dir)
	if err != nil {
		n.release(dir)
		n.log.Error(err, "Cannot wait for the VM to exit", "dir", dir)
		return
	}
	go func() {
		defer n.release(dir)
		select {
		case <-exited:
			n.machine(key)
		case <-n.ctx.Done():
		}
	}()
}

// watchLB wakes the QEMUCluster key once the load balancer holding
// lockPath ends. Call it only while the lock is held (see the local
// provider's notifier: a waiter queued earlier would break the process's
// own attempt to lock).
func (n *notifier) watchLB(lockPath string, key client.ObjectKey) {
	if !n.claim(lockPath) {
		return
	}
	go func() {
		// Blocks until the holder exits; it holds nothing meanwhile.
		err := lockfile.WaitReleased(lockPath)
		n.release(lockPath)
		if err != nil {
			n.log.Error(err, "Waiting for the load balancer to end", "lock", lockPath)
		}
		n.send(n.clusters, &qemuv1.QEMUCluster{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}})
	}()
}

// watchReport wakes the QEMUMachine key whenever the guest writes to its
// bootstrap report file path (vm.ReportLog), until the VM in path's
// directory exits. The watch exists because the report comes minutes after
// the VM starts, once kubeadm has run, long after the reconciles that
// started it: without it the machine would learn of its bootstrap only at
// its next periodic resync.
func (n *notifier) watchReport(path string, key client.ObjectKey) {
	if n.ctx.Err() != nil {
		return
	}
	path = filepath.Clean(path)
	// Prefixed: a report file's path must not be taken for a VM directory
	// or lock file in waiting.
	what := "report:" + path
	if !n.claim(what) {
		return
	}
	exited, err := vm.Exited(n.ctx, filepath.Dir(path))
	if err != nil {
		n.release(what)
		n.log.Error(err, "Cannot wait for the VM to exit", "dir", filepath.Dir(path))
		return
	}
	w, err := n.reportWatcher()
	if err == nil {
		n.mu.Lock()
		n.reportKeys[path] = key
		n.mu.Unlock()
		if err = w.Add(path); err != nil {
			n.mu.Lock()
			delete(n.reportKeys, path)
			n.mu.Unlock()
		}
	}
	if err != nil {
		n.release(what)
		n.log.Error(err, "Cannot watch the VM's bootstrap report", "path", path)
		return
	}
	go func() {
		defer n.release(what)
		// A report written before the watch began raised no event, and
		// the reconcile that asked for the watch may have read the file
		// just before it came.
		if rep, _ := readBootstrapReport(path); rep.Reported {
			n.machine(key)
		}
		select {
		case <-exited:
		case <-n.ctx.Done():
		}
		n.mu.Lock()
		delete(n.reportKeys, path)
		n.mu.Unlock()
		// The VM's directory may be gone already, and its watch with it.
		_ = w.Remove(path)
	}()
}

// reportWatcher returns the inotify instance of report files, making it and
// its relaying goroutine on first use.
func (n *notifier) reportWatcher() (*fsnotify.Watcher, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.reports != nil {
		return n.reports, nil
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	n.reports = w
	go n.relayReports(w)
	return w, nil
}

// relayReports wakes a machine on each write to its report file until the
// notifier's context ends. The guest's serial port writes byte by byte, so
// a report raises a burst of events; the controller's work queue folds the
// requests of a burst together.
func (n *notifier) relayReports(w *fsnotify.Watcher) {
	defer w.Close()
	for {
		select {
		case <-n.ctx.Done():
			return
		case err, ok := <-w.Errors:
			if !ok {
				return
			}
			n.log.Error(err, "Watching bootstrap reports")
		case ev, ok := <-w.Events:
			if !ok {
				return
			}
			if !ev.Has(fsnotify.Write) {
				continue
			}
			n.mu.Lock()
			key, found := n.reportKeys[ev.Name]
			n.mu.Unlock()
			if found {
				n.machine(key)
			}
		}
	}
}
