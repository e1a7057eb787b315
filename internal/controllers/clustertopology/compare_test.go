package clustertopology

import (
	"encoding/json"
	"strings"
	"testing"
)

func decode(t *testing.T, s string) map[string]any {
	t.Helper()
	m := map[string]any{}
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestNeedsApply(t *testing.T) {
	const owned = `{"f:metadata":{"f:labels":{"f:a":{}},"f:ownerReferences":{"k:{\"uid\":\"u1\"}":{}}},"f:spec":{"f:size":{},"f:disks":{},"f:ports":{"k:{\"name\":\"http\"}":{".":{},"f:name":{},"f:port":{}}}}}`
	const want = `{"metadata":{"name":"x","labels":{"a":"1"},"ownerReferences":[{"uid":"u1","name":"c"}]},"spec":{"size":"large","disks":["a","b"],"ports":[{"name":"http","port":80}]}}`
	tests := []struct {
		name, current, want, owned string
		change                     bool
		why                        string
	}{
		{name: "same values and ownership", current: `{"metadata":{"name":"x","labels":{"a":"1","theirs":"y"},"ownerReferences":[{"uid":"other"},{"uid":"u1","name":"c","controller":true}]},"spec":{"size":"large","disks":["a","b"],"ports":[{"name":"http","port":80}],"defaulted":true},"status":{"ready":true}}`,
			want: want, owned: owned},
		{name: "numbers of either type", current: `{"metadata":{"name":"x","labels":{"a":"1"},"ownerReferences":[{"uid":"u1","name":"c"}]},"spec":{"size":"large","disks":["a","b"],"ports":[{"name":"http","port":80.0}]}}`,
			want: want, owned: owned},
		{name: "a user changed a managed value", current: `{"metadata":{"name":"x","labels":{"a":"1"},"ownerReferences":[{"uid":"u1","name":"c"}]},"spec":{"size":"small","disks":["a","b"],"ports":[{"name":"http","port":80}]}}`,
			want: want, owned: owned, change: true, why: "spec.size is small"},
		{name: "a managed list lost an item", current: `{"metadata":{"name":"x","labels":{"a":"1"},"ownerReferences":[{"uid":"u1","name":"c"}]},"spec":{"size":"large","disks":["a"],"ports":[{"name":"http","port":80}]}}`,
			want: want, owned: owned, change: true, why: "spec.disks has 1 items"},
		{name: "an owner reference went", current: `{"metadata":{"name":"x","labels":{"a":"1"},"ownerReferences":[{"uid":"other"}]},"spec":{"size":"large","disks":["a","b"],"ports":[{"name":"http","port":80}]}}`,
			want: want, owned: owned, change: true, why: "metadata.ownerReferences[0] is missing"},
		{name: "the topology dropped a field it set", current: `{"metadata":{"name":"x","labels":{"a":"1","old":"z"},"ownerReferences":[{"uid":"u1","name":"c"}]},"spec":{"size":"large","disks":["a","b"],"ports":[{"name":"http","port":80}]}}`,
			want: want, owned: `{"f:metadata":{"f:labels":{"f:a":{},"f:old":{}}}}`, change: true, why: "metadata.labels.old is owned but no longer wanted"},
		{name: "the topology dropped a keyed list item", current: `{"metadata":{"name":"x","labels":{"a":"1"},"ownerReferences":[{"uid":"u1","name":"c"}]},"spec":{"size":"large","disks":["a","b"],"ports":[{"name":"http","port":80}]}}`,
			want: `{"metadata":{"name":"x","labels":{"a":"1"},"ownerReferences":[{"uid":"u1","name":"c"}]},"spec":{"size":"large","disks":["a","b"],"ports":[]}}`, owned: owned, change: true, why: "spec.ports has 1 items, want 0"},
		{name: "never applied by the topology", current: `{"metadata":{"name":"x","labels":{"a":"1"},"ownerReferences":[{"uid":"u1","name":"c"}]},"spec":{"size":"large","disks":["a","b"],"ports":[{"name":"http","port":80}]}}`,
			want: want, change: true, why: "does not own"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ownedFields []map[string]any
			if tt.owned != "" {
				ownedFields = []map[string]any{decode(t, tt.owned)}
			}
			change, why := needsApply(decode(t, tt.current), decode(t, tt.want), ownedFields)
			if change != tt.change || !strings.Contains(why, tt.why) {
				t.Fatalf("needsApply = %v (%q), want %v (%q)", change, why, tt.change, tt.why)
			}
		})
	}
}

func TestOwnedBeyondFindsDroppedSetAndIndexedItems(t *testing.T) {
	want := decode(t, `{"spec":{"tags":["a"],"matrix":[[1]]}}`)
	if why := ownedBeyond(decode(t, `{"f:spec":{"f:tags":{"v:\"a\"":{}}}}`), want, nil); why != "" {
		t.Errorf("a set item still wanted counted as dropped: %s", why)
	}
	if why := ownedBeyond(decode(t, `{"f:spec":{"f:tags":{"v:\"b\"":{}}}}`), want, nil); why == "" {
		t.Error("a dropped set item was not noticed")
	}
	if why := ownedBeyond(decode(t, `{"f:spec":{"f:matrix":{"i:1":{}}}}`), want, nil); why == "" {
		t.Error("a dropped indexed item was not noticed")
	}
}
