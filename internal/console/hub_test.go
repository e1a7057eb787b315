package console

import (
	"fmt"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// A burst of changes wakes a stream once and leaves each changed Cluster
// once in what it sends, however often it changed.
func TestHubCoalescesBursts(t *testing.T) {
	h := newHub()
	sub := h.subscribe(client.ObjectKey{Namespace: "ns", Name: "c0007"}, true)
	other := h.subscribe(client.ObjectKey{}, false)
	for round := range 3 {
		for i := range 1000 {
			key := client.ObjectKey{Namespace: "ns", Name: fmt.Sprintf("c%04d", i)}
			h.publish(change{cluster: &key, namespace: "ns", detailOf: key.Name})
			if round == 0 && i == 0 {
				h.publish(change{namespace: "ns", detailOf: "c0007"}) // a Machine of c0007
			}
		}
	}
	if len(sub.wake) != 1 || len(other.wake) != 1 {
		t.Fatalf("wake-ups pending: %d and %d, want one each", len(sub.wake), len(other.wake))
	}
	keys, dirty := sub.take()
	if len(keys) != 1000 || !dirty {
		t.Errorf("the stream following c0007 has %d clusters to send (want 1000) and detail dirty %v (want true)", len(keys), dirty)
	}
	if keys, dirty := other.take(); len(keys) != 1000 || dirty {
		t.Errorf("the fleet stream has %d clusters to send (want 1000) and detail dirty %v (want false)", len(keys), dirty)
	}
	if keys, dirty := sub.take(); len(keys) != 0 || dirty {
		t.Errorf("after sending, %d clusters and detail dirty %v are left", len(keys), dirty)
	}
	h.publish(change{namespace: "other", anyInNS: true})
	if keys, dirty := sub.take(); len(keys) != 0 || dirty {
		t.Errorf("a change in another namespace marked %d clusters and detail dirty %v", len(keys), dirty)
	}
}
