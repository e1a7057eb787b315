package move

import (
	"fmt"
	"sort"
	"strings"
)

// Key names one object: its API group and kind (the version does not
// matter for identity), namespace and name.
type Key struct {
	Group, Kind, Namespace, Name string
}

// String is how progress lines and errors name an object:
// "Machine default/demo-abc" or "LocalMachine.infrastructure.cluster.x-k8s.io default/demo-abc"
// when the group is not Cluster API's core or Kubernetes' core.
func (k Key) String() string {
	kind := k.Kind
	if k.Group != "" && k.Group != "cluster.x-k8s.io" {
		kind += "." + k.Group
	}
	if k.Namespace == "" {
		return kind + " " + k.Name
	}
	return kind + " " + k.Namespace + "/" + k.Name
}

// Node is one object to move and the objects its owner references name.
type Node struct {
	Key    Key
	Owners []Key
}

// MissingOwnerError says that objects are owned by objects that are neither
// moved nor already where they go: created without their owner, the garbage
// collector of the target would delete them.
type MissingOwnerError struct {
	// Missing maps each object to the owners it lacks.
	Missing map[Key][]Key
}

func (e *MissingOwnerError) Error() string {
	var lines []string
	for k, owners := range e.Missing {
		var names []string
		for _, o := range owners {
			names = append(names, o.String())
		}
		lines = append(lines, fmt.Sprintf("%s is owned by %s", k, strings.Join(names, ", ")))
	}
	sort.Strings(lines)
	return "owners that are neither moved nor present in the target: " + strings.Join(lines, "; ") +
		". Label the owner with clusterctl.cluster.x-k8s.io/move so it moves too, or remove the owner reference"
}

// CycleError says that owner references form a cycle, so no object of it
// can be created first.
type CycleError struct {
	// Cycle lists the objects around the cycle, the first repeated last.
	Cycle []Key
}

func (e *CycleError) Error() string {
	var names []string
	for _, k := range e.Cycle {
		names = append(names, k.String())
	}
	return "owner references form a cycle (" + strings.Join(names, " is owned by ") +
		"): remove one of these owner references before moving"
}

// Order returns the objects in creation batches: every object comes in a
// later batch than each of its owners, so that owner references can be
// re-pointed at owners that already exist. An owner outside nodes is
// accepted when present says it already exists where the objects go (a
// move resumed after part of the source was deleted). Within a batch
// objects are sorted by kind, namespace and name, so a plan reads the same
// every time. Deleting runs the batches backwards (DeletionOrder).
func Order(nodes []Node, present func(Key) bool) ([][]Key, error) {
	byKey := make(map[Key]*Node, len(nodes))
	for i := range nodes {
		n := &nodes[i]
		if _, dup := byKey[n.Key]; dup {
			return nil, fmt.Errorf("%s is listed twice", n.Key)
		}
		byKey[n.Key] = n
	}
	missing := map[Key][]Key{}
	waitsOn := make(map[Key]int, len(nodes)) // owners not yet created
	owned := map[Key][]Key{}                 // owner -> objects it owns
	for _, n := range nodes {
		seen := map[Key]bool{}
		for _, o := range n.Owners {
			if seen[o] {
				continue
			}
			seen[o] = true
			if n.Key.Namespace == "" && o.Namespace != "" {
				return nil, fmt.Errorf("%s is cluster-scoped but owned by %s, which is namespaced; Kubernetes gives cluster-scoped objects only cluster-scoped owners: remove that owner reference", n.Key, o)
			}
			if _, ok := byKey[o]; !ok {
				if present == nil || !present(o) {
					missing[n.Key] = append(missing[n.Key], o)
				}
				continue
			}
			waitsOn[n.Key]++
			owned[o] = append(owned[o], n.Key)
		}
	}
	if len(missing) > 0 {
		return nil, &MissingOwnerError{Missing: missing}
	}

	var batches [][]Key
	var ready []Key
	for _, n := range nodes {
		if waitsOn[n.Key] == 0 {
			ready = append(ready, n.Key)
		}
	}
	done := 0
	for len(ready) > 0 {
		sortKeys(ready)
		batches = append(batches, ready)
		done += len(ready)
		var next []Key
		for _, k := range ready {
			for _, child := range owned[k] {
				waitsOn[child]--
				if waitsOn[child] == 0 {
					next = append(next, child)
				}
			}
		}
		ready = next
	}
	if done < len(nodes) {
		return nil, &CycleError{Cycle: findCycle(byKey, waitsOn)}
	}
	return batches, nil
}

// DeletionOrder is the reverse of the creation order: objects before
// their owners.
func DeletionOrder(batches [][]Key) []Key {
	var out []Key
	for i := len(batches) - 1; i >= 0; i-- {
		b := append([]Key(nil), batches[i]...)
		sortKeys(b)
		for j := len(b) - 1; j >= 0; j-- {
			out = append(out, b[j])
		}
	}
	return out
}

// findCycle walks owner references from a node that was never ready until
// it comes back to a node already on its path. Every such node has an
// owner that was never ready either, so the walk cannot stop short.
func findCycle(byKey map[Key]*Node, waitsOn map[Key]int) []Key {
	var stuck []Key
	for k, n := range waitsOn {
		if n > 0 {
			stuck = append(stuck, k)
		}
	}
	sortKeys(stuck)
	if len(stuck) == 0 {
		return nil
	}
	at := map[Key]int{}
	var path []Key
	k := stuck[0]
	for {
		if i, ok := at[k]; ok {
			return append(path[i:], k)
		}
		at[k] = len(path)
		path = append(path, k)
		owners := append([]Key(nil), byKey[k].Owners...)
		sortKeys(owners)
		next := Key{}
		for _, o := range owners {
			if waitsOn[o] > 0 {
				next = o
				break
			}
		}
		if next == (Key{}) {
			return path // cannot happen; say what was found
		}
		k = next
	}
}

// kindRank puts the kinds users think of as the top of a cluster first
// within a batch; other kinds follow alphabetically.
var kindRank = map[string]int{"Cluster": 0, "ClusterClass": 1}

// sortKeys puts cluster-scoped objects first in a batch (namespaced objects
// may name them, an identity say, and a webhook may want them to exist),
// then by kindRank, kind, group, namespace and name.
func sortKeys(keys []Key) {
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if (a.Namespace == "") != (b.Namespace == "") {
			return a.Namespace == ""
		}
		ra, oka := kindRank[a.Kind]
		rb, okb := kindRank[b.Kind]
		if oka != okb {
			return oka
		}
		if oka && ra != rb {
			return ra < rb
		}
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		if a.Group != b.Group {
			return a.Group < b.Group
		}
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
}
