package local

import (
	"context"
	"path/filepath"
	"sync"

	"github.com/fsnotify/fsnotify"
	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	localv1 "capstan.dev/capstan/api/infrastructure/local/v1beta2"
	"capstan.dev/capstan/internal/lockfile"
	"capstan.dev/capstan/internal/providers/local/machinedir"
)

// notifier turns what happens on disk into reconcile requests: a change of
// status.json in a watched machine directory, and the death of a process
// (its lock released). It runs as a manager Runnable; its channels feed the
// controllers' channel sources.
type notifier struct {
	log      logr.Logger
	fs       *fsnotify.Watcher
	machines chan event.GenericEvent
	clusters chan event.GenericEvent
	done     chan struct{}

	mu sync.Mutex
	// dirs maps a watched machine directory to its LocalMachine.
	dirs map[string]client.ObjectKey
	// waiting holds the lock files a goroutine is blocked on.
	waiting map[string]bool
}

func newNotifier(log logr.Logger) (*notifier, error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	return &notifier{
		log:      log,
		fs:       w,
		machines: make(chan event.GenericEvent, 1024),
		clusters: make(chan event.GenericEvent, 1024),
		done:     make(chan struct{}),
		dirs:     map[string]client.ObjectKey{},
		waiting:  map[string]bool{},
	}, nil
}

// Start relays fsnotify events until ctx ends.
func (n *notifier) Start(ctx context.Context) error {
	defer close(n.done)
	defer n.fs.Close()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err, ok := <-n.fs.Errors:
			if !ok {
				return nil
			}
			n.log.Error(err, "Watching machine directories")
		case ev, ok := <-n.fs.Events:
			if !ok {
				return nil
			}
			if filepath.Base(ev.Name) != machinedir.StatusFile {
				continue
			}
			n.mu.Lock()
			key, found := n.dirs[filepath.Dir(ev.Name)]
			n.mu.Unlock()
			if found {
				n.send(n.machines, key, localMachineStub)
			}
		}
	}
}

func localMachineStub(key client.ObjectKey) client.Object {
	return &localv1.LocalMachine{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
}

func localClusterStub(key client.ObjectKey) client.Object {
	return &localv1.LocalCluster{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
}

// send queues a request for key, dropping it once the notifier stopped.
func (n *notifier) send(ch chan event.GenericEvent, key client.ObjectKey, stub func(client.ObjectKey) client.Object) {
	select {
	case ch <- event.GenericEvent{Object: stub(key)}:
	case <-n.done:
	}
}

// watchMachine reports status.json changes in dir as requests for key.
func (n *notifier) watchMachine(dir string, key client.ObjectKey) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, ok := n.dirs[dir]; ok {
		return nil
	}
	if err := n.fs.Add(dir); err != nil {
		return err
	}
	n.dirs[dir] = key
	return nil
}

// forgetMachine stops watching dir (its directory is about to go).
func (n *notifier) forgetMachine(dir string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, ok := n.dirs[dir]; ok {
		_ = n.fs.Remove(dir)
		delete(n.dirs, dir)
	}
}

// watchLock reports the release of lockPath (its process's death) once, as
// a request for key on ch. Call it only while the lock is held: a waiter
// queued before the process takes its lock would make the process's own
// non-blocking attempt fail.
func (n *notifier) watchLock(lockPath string, ch chan event.GenericEvent, key client.ObjectKey, stub func(client.ObjectKey) client.Object) {
	n.mu.Lock()
	if n.waiting[lockPath] {
		n.mu.Unlock()
		return
	}
	n.waiting[lockPath] = true
	n.mu.Unlock()
	go func() {
		// Blocks until the holder exits; it cannot be cancelled, and
		// does not need to be: it holds nothing while it waits.
		err := lockfile.WaitReleased(lockPath)
		n.mu.Lock()
		delete(n.waiting, lockPath)
		n.mu.Unlock()
		if err != nil {
			n.log.Error(err, "Waiting for a process to end", "lock", lockPath)
		}
		n.send(ch, key, stub)
	}()
}
