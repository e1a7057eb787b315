package qemu

import (
	"context"
	"sync"

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
// that feed the controllers' channel sources. One goroutine waits per
// process; none polls.
type notifier struct {
	ctx      context.Context
	log      logr.Logger
	machines chan event.GenericEvent
	clusters chan event.GenericEvent

	mu sync.Mutex
	// waiting holds the VM directories and lock files a goroutine waits on.
	waiting map[string]bool
}

func newNotifier(ctx context.Context, log logr.Logger) *notifier {
	return &notifier{
		ctx: ctx, log: log,
		machines: make(chan event.GenericEvent, 1024),
		clusters: make(chan event.GenericEvent, 1024),
		waiting:  map[string]bool{},
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
