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

// images builds the node images in the background, one per Kubernetes
// version, once for every machine that waits for it: a build takes minutes
// the first time, far too long to hold a reconcile worker. The machines
// waiting are woken at each step of the build (so that their condition
// says how far it got) and when it ends.
type images struct {
	ctx     context.Context
	log     logr.Logger
	options image.NodeOptions
	ensure  func(context.Context, image.NodeOptions) (image.Image, error)
	wake    func(client.ObjectKey)

	mu     sync.Mutex
	builds map[string]*imageBuild // by Kubernetes version
}

// imageBuild is the state of one version's image.
type imageBuild struct {
	building bool
	step     string
	img      *image.Image
	err      error
	failedAt time.Time
	waiters  map[client.ObjectKey]bool
}

// get returns the image of version once it is built. Until then it
// returns nil and the step under way (or the build's error), and starts
// the build if none runs; key is woken when the build moves on.
func (m *images) get(version string, key client.ObjectKey) (*image.Image, string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.builds == nil {
		m.builds = map[string]*imageBuild{}
	}
	b := m.builds[version]
	if b == nil {
		b = &imageBuild{waiters: map[client.ObjectKey]bool{}}
		m.builds[version] = b
	}
	if b.img != nil {
		return b.img, "", nil
	}
	b.waiters[key] = true
	if b.err != nil && time.Since(b.failedAt) < imageRetry {
		return nil, "", b.err
	}
	if !b.building {
		b.building, b.err, b.step = true, nil, "starting"
		go m.build(version, b)
	}
	return nil, b.step, nil
}

// forget drops key from the machines to wake (it is being deleted).
func (m *images) forget(key client.ObjectKey) {
	m.mu.Lock()
	for _, b := range m.builds {
		delete(b.waiters, key)
	}
	m.mu.Unlock()
}

func (m *images) build(version string, b *imageBuild) {
	o := m.options
	o.KubernetesVersion = version
	o.Progress = func(step string) {
		m.mu.Lock()
		b.step = step
		m.mu.Unlock()
		m.wakeAll(b, false)
	}
	m.log.Info("Building the node image", "version", version, "cacheDir", o.CacheDir)
	img, err := m.ensure(m.ctx, o)
	m.mu.Lock()
	b.building = false
	if err != nil {
		b.err, b.failedAt = err, time.Now()
		m.log.Error(err, "Building the node image failed", "version", version)
	} else {
		b.img = &img
		m.log.Info("Node image ready", "version", version, "image", img.ID)
	}
	m.mu.Unlock()
	m.wakeAll(b, true)
}

// wakeAll wakes the machines waiting for b, forgetting them when the build
// is over.
func (m *images) wakeAll(b *imageBuild, over bool) {
	m.mu.Lock()
	keys := make([]client.ObjectKey, 0, len(b.waiters))
	for k := range b.waiters {
		keys = append(keys, k)
	}
	if over {
		b.waiters = map[client.ObjectKey]bool{}
	}
	m.mu.Unlock()
	for _, k := range keys {
		m.wake(k)
	}
}
