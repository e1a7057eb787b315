package inmemory

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/uuid"
)

// object is a stored Kubernetes object in its JSON form. Stored objects are
// never changed in place: every write stores a new map, so readers may
// encode what they got without copying or locking.
type object = map[string]any

// event is one change of a stored object, as a watch reports it.
type event struct {
	Type     string // ADDED, MODIFIED, DELETED
	resource string
	rv       uint64
	obj      object
}

// historySize is how many recent events a store keeps so that a watch can
// resume from a resourceVersion; older ones get 410 Gone and relist.
const historySize = 4096

// watcherBuffer is how many events a slow watcher may have pending before
// it is closed (its client re-watches from its last resourceVersion).
const watcherBuffer = 1024

// store holds one simulated cluster's objects: a resourceVersion counter
// shared by all kinds (like etcd's revision), optimistic concurrency, and
// watches that can resume from a recent resourceVersion.
type store struct {
	mu       sync.Mutex
	rv       uint64
	objs     map[string]map[string]object // resource -> namespace/name -> object
	history  []event                      // ring of the last historySize events
	watchers map[*watcher]struct{}
	closed   bool
	// onWrite, when set, is called (without the lock) after every change
	// made through the API server, so the simulated kubelet can react.
	onWrite func(resource string, obj object)
}

func newStore() *store {
	return &store{objs: map[string]map[string]object{}, watchers: map[*watcher]struct{}{}}
}

type watcher struct {
	resource  string
	namespace string
	labels    labels.Selector
	fields    fields.Selector
	ch        chan event
	done      bool
}

func key(ns, name string) string { return ns + "/" + name }

func metaOf(o object) map[string]any {
	m, _ := o["metadata"].(map[string]any)
	if m == nil {
		m = map[string]any{}
		o["metadata"] = m
	}
	return m
}

func str(m map[string]any, k string) string { s, _ := m[k].(string); return s }

func nameOf(o object) (string, string) {
	m := metaOf(o)
	return str(m, "namespace"), str(m, "name")
}

func rvOf(o object) string { return str(metaOf(o), "resourceVersion") }

// currentRV is the store's latest resourceVersion.
func (s *store) currentRV() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rv
}

func (s *store) get(res, ns, name string) (object, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.objs[res][key(ns, name)]
	return o, ok
}

// list returns the matching objects, sorted by namespace and name, and the
// resourceVersion they were read at.
func (s *store) list(res, ns string, ls labels.Selector, fs fields.Selector) ([]object, uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []object
	for _, o := range s.objs[res] {
		if matches(o, ns, ls, fs) {
			out = append(out, o)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		ni, nj := nameOfPair(out[i]), nameOfPair(out[j])
		return ni < nj
	})
	return out, s.rv
}

func nameOfPair(o object) string { ns, n := nameOf(o); return ns + "/" + n }

func matches(o object, ns string, ls labels.Selector, fs fields.Selector) bool {
	m := metaOf(o)
	if ns != "" && str(m, "namespace") != ns {
		return false
	}
	if ls != nil && !ls.Empty() {
		set := labels.Set{}
		if l, ok := m["labels"].(map[string]any); ok {
			for k, v := range l {
				set[k], _ = v.(string)
			}
		}
		if !ls.Matches(set) {
			return false
		}
	}
	if fs != nil && !fs.Empty() {
		set := fields.Set{}
		for _, r := range fs.Requirements() {
			set[r.Field] = fieldValue(o, r.Field)
		}
		if !fs.Matches(set) {
			return false
		}
	}
	return true
}

// fieldValue reads a dotted path such as spec.nodeName as a string.
func fieldValue(o object, path string) string {
	var cur any = o
	for _, p := range strings.Split(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return ""
		}
		cur = m[p]
	}
	switch v := cur.(type) {
	case string:
		return v
	case nil:
		return ""
	default:
		return fmt.Sprint(v)
	}
}

// create stores a new object; it fills in uid, creationTimestamp,
// resourceVersion and generation as an API server does.
func (s *store) create(gr schema.GroupResource, res string, o object) (object, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, apierrors.NewServiceUnavailable("the simulated cluster is being deleted")
	}
	m := metaOf(o)
	ns, name := str(m, "namespace"), str(m, "name")
	if name == "" {
		if gen := str(m, "generateName"); gen != "" {
			name = gen + string(uuid.NewUUID())[:5]
			m["name"] = name
		} else {
			s.mu.Unlock()
			return nil, apierrors.NewBadRequest("metadata.name is required")
		}
	}
	if s.objs[res] == nil {
		s.objs[res] = map[string]object{}
	}
	if _, ok := s.objs[res][key(ns, name)]; ok {
		s.mu.Unlock()
		return nil, apierrors.NewAlreadyExists(gr, name)
	}
	s.rv++
	m["uid"] = string(uuid.NewUUID())
	m["creationTimestamp"] = time.Now().UTC().Format(time.RFC3339)
	m["resourceVersion"] = strconv.FormatUint(s.rv, 10)
	m["generation"] = int64(1)
	delete(m, "deletionTimestamp")
	s.objs[res][key(ns, name)] = o
	s.emitLocked(event{Type: "ADDED", resource: res, rv: s.rv, obj: o})
	s.mu.Unlock()
	return o, nil
}

// update replaces an object. A non-empty resourceVersion in o must match the
// stored one (409 Conflict otherwise). An object being deleted whose last
// finalizer goes is removed.
func (s *store) update(gr schema.GroupResource, res string, o object) (object, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := metaOf(o)
	ns, name := str(m, "namespace"), str(m, "name")
	cur, ok := s.objs[res][key(ns, name)]
	if !ok {
		return nil, apierrors.NewNotFound(gr, name)
	}
	cm := metaOf(cur)
	if rv := str(m, "resourceVersion"); rv != "" && rv != str(cm, "resourceVersion") {
		return nil, apierrors.NewConflict(gr, name, fmt.Errorf("the object has been modified; please apply your changes to the latest version and try again"))
	}
	for _, k := range []string{"uid", "creationTimestamp", "deletionTimestamp"} {
		if v, ok := cm[k]; ok {
			m[k] = v
		} else {
			delete(m, k)
		}
	}
	gen, _ := cm["generation"].(int64)
	if gen == 0 {
		gen = 1
	}
	if !equalJSON(specOf(cur), specOf(o)) {
		gen++
	}
	m["generation"] = gen
	m["resourceVersion"] = str(cm, "resourceVersion")
	if equalJSON(cur, o) {
		return cur, nil // nothing changed: no new resourceVersion, no event
	}
	s.rv++
	m["resourceVersion"] = strconv.FormatUint(s.rv, 10)
	if _, deleting := m["deletionTimestamp"]; deleting && len(finalizers(o)) == 0 {
		delete(s.objs[res], key(ns, name))
		s.emitLocked(event{Type: "DELETED", resource: res, rv: s.rv, obj: o})
		return o, nil
	}
	s.objs[res][key(ns, name)] = o
	s.emitLocked(event{Type: "MODIFIED", resource: res, rv: s.rv, obj: o})
	return o, nil
}

// remove deletes an object, or marks it deleted while it has finalizers.
func (s *store) remove(gr schema.GroupResource, res, ns, name string) (object, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.objs[res][key(ns, name)]
	if !ok {
		return nil, apierrors.NewNotFound(gr, name)
	}
	s.rv++
	o := copyObject(cur)
	m := metaOf(o)
	m["resourceVersion"] = strconv.FormatUint(s.rv, 10)
	if len(finalizers(cur)) > 0 {
		if _, ok := m["deletionTimestamp"]; !ok {
			m["deletionTimestamp"] = time.Now().UTC().Format(time.RFC3339)
		}
		s.objs[res][key(ns, name)] = o
		s.emitLocked(event{Type: "MODIFIED", resource: res, rv: s.rv, obj: o})
		return o, nil
	}
	delete(s.objs[res], key(ns, name))
	s.emitLocked(event{Type: "DELETED", resource: res, rv: s.rv, obj: o})
	return o, nil
}

func finalizers(o object) []any { f, _ := metaOf(o)["finalizers"].([]any); return f }

func specOf(o object) any {
	out := map[string]any{}
	for k, v := range o {
		if k != "metadata" && k != "status" {
			out[k] = v
		}
	}
	return out
}

func equalJSON(a, b any) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(ja) == string(jb)
}

// copyObject deep-copies an object through JSON, which also normalises
// numbers the way decoded request bodies have them.
func copyObject(o object) object {
	b, _ := json.Marshal(o)
	out := object{}
	_ = json.Unmarshal(b, &out)
	normalise(out)
	return out
}

// normalise turns JSON numbers that are whole into int64, so generation
// and friends compare and encode as integers.
func normalise(o object) {
	if m, ok := o["metadata"].(map[string]any); ok {
		if g, ok := m["generation"].(float64); ok {
			m["generation"] = int64(g)
		}
	}
}

func (s *store) emitLocked(e event) {
	s.history = append(s.history, e)
	if len(s.history) > historySize {
		s.history = s.history[len(s.history)-historySize:]
	}
	for w := range s.watchers {
		if w.resource != e.resource || !matches(e.obj, w.namespace, w.labels, w.fields) {
			continue
		}
		select {
		case w.ch <- e:
		default:
			// Too slow: close it; the client resumes from its last
			// resourceVersion.
			s.dropLocked(w)
		}
	}
}

func (s *store) dropLocked(w *watcher) {
	if !w.done {
		w.done = true
		close(w.ch)
		delete(s.watchers, w)
	}
}

// errGone says a watch asked to resume from a resourceVersion older than
// the store remembers.
var errGone = fmt.Errorf("too old resource version")

// watch starts a watch of res from resourceVersion from (0: from now,
// after ADDED events for every matching object when initial is true). The
// returned events are the replayed ones; later ones arrive on w.ch.
func (s *store) watch(res, ns string, ls labels.Selector, fs fields.Selector, from uint64, initial bool) (*watcher, []event, uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, nil, 0, apierrors.NewServiceUnavailable("the simulated cluster is being deleted")
	}
	var replay []event
	switch {
	case initial || from == 0:
		for _, o := range s.objs[res] {
			if matches(o, ns, ls, fs) {
				replay = append(replay, event{Type: "ADDED", resource: res, obj: o})
			}
		}
	case from < s.rv:
		if len(s.history) == 0 || s.history[0].rv > from+1 {
			return nil, nil, 0, errGone
		}
		for _, e := range s.history {
			if e.rv > from && e.resource == res && matches(e.obj, ns, ls, fs) {
				replay = append(replay, e)
			}
		}
	}
	w := &watcher{resource: res, namespace: ns, labels: ls, fields: fs, ch: make(chan event, watcherBuffer)}
	s.watchers[w] = struct{}{}
	return w, replay, s.rv, nil
}

func (s *store) stopWatch(w *watcher) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropLocked(w)
}

// close ends every watch and forgets every object.
func (s *store) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for w := range s.watchers {
		s.dropLocked(w)
	}
	s.objs = map[string]map[string]object{}
	s.history = nil
}
