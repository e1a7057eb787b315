package qemu

import (
	"context"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"capstan.dev/capstan/internal/providers/qemu/image"
)

// imageRetry is how long a failed build is reported before the next
// machine that needs the image tries again.
const imageRetry = time.Minute

// images builds the guest image in the background, once for every machine
// that waits for it: a build takes minutes the first time, far too long to
// hold a reconcile worker. The machines waiting are woken at each step of
// the build (so that their condition says how far it got) and when it ends.
type images struct {
	ctx     context.Context
	log     logr.Logger
	options image.Options
	ensure  func(context.Context, image.Options) (image.Image, error)
	wake    func(client.ObjectKey)

	mu       sync.Mutex
	building bool
	step     string
	img      *image.Image
	err      error
	failedAt time.Time
	waiters  map[client.ObjectKey]bool
}

// get returns the image once it is built. Until then it returns nil and
// the step under way (or the build's error), and starts the build if none
// runs; key is woken when the build moves on.
func (m *images) get(key client.ObjectKey) (*image.Image, string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.img != nil {
		return m.img, "", nil
	}
	m.waiters[key] = true
	if m.err != nil && time.Since(m.failedAt) < imageRetry {
		return nil, "", m.err
	}
	if !m.building {
		m.building, m.err, m.step = true, nil, "starting"
		go m.build()
	}
	return nil, m.step, nil
}

// forget drops key from the machines to wake (it is being deleted).
func (m *images) forget(key client.ObjectKey) {
	m.mu.Lock()
	delete(m.waiters, key)
	m.mu.Unlock()
}

func (m *images) build() {
	o := m.options
	o.Progress = func(step string) {
		m.mu.Lock()
		m.step = step
		m.mu.Unlock()
		m.wakeAll(false)
	}
	m.log.Info("Building the guest image", "cacheDir", o.CacheDir)
	img, err := m.ensure(m.ctx, o)
	m.mu.Lock()
	m.building = false
	if err != nil {
		m.err, m.failedAt = err, time.Now()
		m.log.Error(err, "Building the guest image failed")
	} else {
		m.img = &img
		m.log.Info("Guest image ready", "image", img.ID)
	}
	m.mu.Unlock()
	m.wakeAll(true)
}

// wakeAll wakes the waiting machines, forgetting them when the build is
// over.
func (m *images) wakeAll(over bool) {
	m.mu.Lock()
	keys := make([]client.ObjectKey, 0, len(m.waiters))
	for k := range m.waiters {
		keys = append(keys, k)
	}
	if over {
		m.waiters = map[client.ObjectKey]bool{}
	}
	m.mu.Unlock()
	for _, k := range keys {
		m.wake(k)
	}
}
