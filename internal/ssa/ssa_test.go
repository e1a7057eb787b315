package ssa

import (
	"encoding/json"
	"strings"
	"testing"
)

func decode(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return v
}

func decodeMap(t *testing.T, s string) map[string]any {
	t.Helper()
	m, ok := decode(t, s).(map[string]any)
	if !ok {
		t.Fatalf("%s is not an object", s)
	}
	return m
}

func TestMissing(t *testing.T) {
	for _, tt := range []struct {
		name             string
		desired, current string
		path             []string
		why              string // "" when current holds desired; else a part of the message
	}{
		{name: "equal", desired: `{"a":1,"b":"x"}`, current: `{"a":1,"b":"x"}`},
		{name: "a server default beside", desired: `{"a":1}`, current: `{"a":1,"d":true}`},
		{name: "changed value", desired: `{"a":1}`, current: `{"a":2}`, why: "a is 2, want 1"},
		{name: "missing field", desired: `{"a":1}`, current: `{}`, why: "a is <nil>, want 1"},
		{name: "empty string is a value", desired: `{"a":""}`, current: `{}`, why: "a is <nil>"},
		{name: "empty object wanted, absent", desired: `{"a":{}}`, current: `{}`},
		{name: "empty list wanted, absent", desired: `{"a":[]}`, current: `{}`},
		{name: "null wanted, absent", desired: `{"a":null}`, current: `{}`},
		{name: "null wanted, set", desired: `{"a":null}`, current: `{"a":1}`, why: "a is set, want it unset"},
		{name: "empty object wanted, a scalar there", desired: `{"a":{}}`, current: `{"a":"x"}`, why: "a is not an object"},
		{name: "empty list wanted, an object there", desired: `{"a":[]}`, current: `{"a":{}}`, why: "a is not a list"},
		{name: "object replaced by a scalar", desired: `{"a":{"b":1}}`, current: `{"a":"x"}`, why: "a is not an object"},
		{name: "nested maps", desired: `{"a":{"b":{"c":"d"}}}`, current: `{"a":{"b":{"c":"d","e":1},"f":2}}`},
		{name: "nested change", desired: `{"a":{"b":{"c":"d"}}}`, current: `{"a":{"b":{"c":"x"}}}`, why: "a.b.c is x, want d"},
		{name: "list items in order, each a subset", desired: `{"l":[{"n":"a"},{"n":"b"}]}`, current: `{"l":[{"n":"a","d":1},{"n":"b"}]}`},
		{name: "list item missing", desired: `{"l":[{"n":"a"},{"n":"b"}]}`, current: `{"l":[{"n":"a"}]}`, why: "l has 1 items, want 2"},
		{name: "list item extra", desired: `{"l":[{"n":"a"}]}`, current: `{"l":[{"n":"a"},{"n":"b"}]}`, why: "l has 2 items, want 1"},
		{name: "list items in another order", desired: `{"l":["a","b"]}`, current: `{"l":["b","a"]}`, why: "l.0 is b, want a"},
		{name: "owner references: others may add", desired: `{"metadata":{"ownerReferences":[{"uid":"u1"}]}}`, current: `{"metadata":{"ownerReferences":[{"uid":"o"},{"uid":"u1","controller":true}]}}`},
		{name: "owner references: ours went", desired: `{"metadata":{"ownerReferences":[{"uid":"u1"}]}}`, current: `{"metadata":{"ownerReferences":[{"uid":"o"}]}}`, why: "metadata.ownerReferences[0] is missing"},
		{name: "finalizers: others may add", desired: `{"metadata":{"finalizers":["a"]}}`, current: `{"metadata":{"finalizers":["b","a"]}}`},
		{name: "the unordered lists are the object's own, not a nested one's", desired: `{"metadata":{"finalizers":["a"]}}`, current: `{"metadata":{"finalizers":["b","a"]}}`, path: []string{"spec"}, why: "spec.metadata.finalizers has 2 items"},
		{name: "the path names the difference", desired: `{"size":"l"}`, current: `{"size":"s"}`, path: []string{"spec"}, why: "spec.size is s, want l"},
		{name: "the whole value differs", desired: `"a"`, current: `"b"`, why: "the object is b"},
		{name: "a float equals an int", desired: `{"n":80.0}`, current: `{"n":80}`},
		{name: "a float does not equal a string", desired: `{"n":80}`, current: `{"n":"80"}`, why: "n is 80, want 80"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			why := Missing(decode(t, tt.desired), decode(t, tt.current), tt.path)
			if (why == "") != (tt.why == "") || !strings.Contains(why, tt.why) {
				t.Errorf("Missing(%s, %s) = %q, want %q", tt.desired, tt.current, why, tt.why)
			}
		})
	}
}

// The API machinery decodes whole numbers as int64, encoding/json as
// float64, the typed converters may leave int or int32: all are one number.
func TestMissingComparesNumbersByValue(t *testing.T) {
	for _, n := range []any{int(3), int32(3), int64(3), float32(3), float64(3), json.Number("3")} {
		if why := Missing(map[string]any{"n": float64(3)}, map[string]any{"n": n}, nil); why != "" {
			t.Errorf("float64 3 and %T 3 differ: %s", n, why)
		}
		if why := Missing(map[string]any{"n": n}, map[string]any{"n": int64(3)}, nil); why != "" {
			t.Errorf("%T 3 and int64 3 differ: %s", n, why)
		}
	}
	if why := Missing(map[string]any{"n": int64(3)}, map[string]any{"n": 3.5}, nil); why == "" {
		t.Error("3 and 3.5 compare equal")
	}
}

func TestDropped(t *testing.T) {
	const desired = `{"args":[{"name":"v","value":"4"}],"ports":[{"containerPort":80,"protocol":"TCP"}],"set":["a","b"],"list":[{"x":1}],"m":{"k":"v"},"empty":{}}`
	for _, tt := range []struct {
		name, owned string
		why         string // "" when desired still sets every owned field
	}{
		{name: "a field", owned: `{"f:m":{"f:k":{}}}`},
		{name: "the node itself", owned: `{"f:m":{".":{},"f:k":{}}}`},
		{name: "a field gone", owned: `{"f:m":{"f:gone":{}}}`, why: "m.gone is owned but no longer wanted"},
		{name: "a whole field gone", owned: `{"f:absent":{}}`, why: "absent is owned"},
		{name: "an empty object still set", owned: `{"f:empty":{}}`},
		{name: "a field below a scalar", owned: `{"f:m":{"f:k":{"f:deeper":{}}}}`, why: "m.k.deeper is owned"},
		{name: "a keyed item", owned: `{"f:args":{"k:{\"name\":\"v\"}":{".":{},"f:name":{},"f:value":{}}}}`},
		{name: "a keyed item's field gone", owned: `{"f:args":{"k:{\"name\":\"v\"}":{"f:valueFrom":{}}}}`, why: `args.k:{"name":"v"}.valueFrom is owned`},
		{name: "a keyed item gone", owned: `{"f:args":{"k:{\"name\":\"w\"}":{".":{}}}}`, why: `args.k:{"name":"w"} is owned`},
		{name: "a keyed item by two keys, one a number", owned: `{"f:ports":{"k:{\"containerPort\":80,\"protocol\":\"TCP\"}":{".":{}}}}`},
		{name: "a keyed item by two keys, one differs", owned: `{"f:ports":{"k:{\"containerPort\":80,\"protocol\":\"UDP\"}":{".":{}}}}`, why: "is owned"},
		{name: "a keyed item in a list that went", owned: `{"f:m":{"k:{\"name\":\"v\"}":{}}}`, why: "is owned"},
		{name: "a set item", owned: `{"f:set":{"v:\"b\"":{}}}`},
		{name: "a set item gone", owned: `{"f:set":{"v:\"c\"":{}}}`, why: `set.v:"c" is owned`},
		{name: "an indexed item", owned: `{"f:list":{"i:0":{"f:x":{}}}}`},
		{name: "an indexed item gone", owned: `{"f:list":{"i:1":{}}}`, why: "list.i:1 is owned"},
		{name: "a negative index", owned: `{"f:list":{"i:-1":{}}}`, why: "list.i:-1 is owned"},
		{name: "a key of no known form", owned: `{"f:m":{"x:whatever":{}}}`},
		{name: "a malformed key", owned: `{"f:args":{"k:{not json":{}}}`, why: "is owned"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			why := Dropped(decodeMap(t, tt.owned), decode(t, desired), nil)
			if (why == "") != (tt.why == "") || !strings.Contains(why, tt.why) {
				t.Errorf("Dropped(%s) = %q, want %q", tt.owned, why, tt.why)
			}
		})
	}
}

func TestDroppedSetItemMustBeEqual(t *testing.T) {
	// A set item is named by its whole value: an item that holds more is
	// another item.
	desired := decode(t, `{"s":[{"a":1,"b":2}]}`)
	if why := Dropped(decodeMap(t, `{"f:s":{"v:{\"a\":1}":{}}}`), desired, nil); why == "" {
		t.Error("a set item {a:1} was found in [{a:1,b:2}]")
	}
	if why := Dropped(decodeMap(t, `{"f:s":{"v:{\"a\":1.0,\"b\":2}":{}}}`), desired, nil); why != "" {
		t.Errorf("an equal set item was not found: %s", why)
	}
}

func TestChange(t *testing.T) {
	const owned = `{"f:metadata":{"f:labels":{"f:a":{}},"f:ownerReferences":{"k:{\"uid\":\"u1\"}":{}}},"f:spec":{"f:size":{},"f:ports":{"k:{\"name\":\"http\"}":{".":{},"f:name":{},"f:port":{}}}}}`
	const desired = `{"metadata":{"name":"x","labels":{"a":"1"},"ownerReferences":[{"uid":"u1"}]},"spec":{"size":"large","ports":[{"name":"http","port":80}]}}`
	for _, tt := range []struct {
		name             string
		desired, current string
		owned            []string
		path             []string
		why              string
	}{
		{name: "nothing to do", desired: desired, owned: []string{owned},
			current: `{"metadata":{"name":"x","labels":{"a":"1","b":"2"},"ownerReferences":[{"uid":"u1","name":"c"}]},"spec":{"size":"large","ports":[{"name":"http","port":80.0,"protocol":"TCP"}]},"status":{"ready":true}}`},
		{name: "no field sets: the values alone", desired: desired,
			current: `{"metadata":{"name":"x","labels":{"a":"1"},"ownerReferences":[{"uid":"u1"}]},"spec":{"size":"large","ports":[{"name":"http","port":80}]}}`},
		{name: "a value differs", desired: desired, owned: []string{owned},
			current: `{"metadata":{"name":"x","labels":{"a":"1"},"ownerReferences":[{"uid":"u1"}]},"spec":{"size":"small","ports":[{"name":"http","port":80}]}}`,
			why:     "spec.size is small, want large"},
		{name: "a dropped label", desired: desired, owned: []string{`{"f:metadata":{"f:labels":{"f:a":{},"f:old":{}}}}`},
			current: `{"metadata":{"name":"x","labels":{"a":"1","old":"z"},"ownerReferences":[{"uid":"u1"}]},"spec":{"size":"large","ports":[{"name":"http","port":80}]}}`,
			why:     "metadata.labels.old is owned but no longer wanted"},
		{name: "the second field set drops a field", desired: desired, owned: []string{owned, `{"f:spec":{"f:gone":{}}}`},
			current: `{"metadata":{"name":"x","labels":{"a":"1"},"ownerReferences":[{"uid":"u1"}]},"spec":{"size":"large","ports":[{"name":"http","port":80}],"gone":1}}`,
			why:     "spec.gone is owned"},
		{name: "below spec: metadata does not count", path: []string{"spec"}, owned: []string{`{"f:metadata":{"f:labels":{"f:old":{}}},"f:spec":{"f:size":{}}}`},
			desired: `{"metadata":{"labels":{"a":"new"}},"spec":{"size":"large"}}`,
			current: `{"metadata":{"labels":{"a":"old","old":"z"}},"spec":{"size":"large","default":1}}`},
		{name: "below spec: a spec value differs", path: []string{"spec"},
			desired: `{"spec":{"size":"large"}}`, current: `{"spec":{"size":"small"}}`, why: "spec.size is small"},
		{name: "below spec: a spec field dropped", path: []string{"spec"}, owned: []string{`{"f:spec":{"f:size":{},"f:zone":{}}}`},
			desired: `{"spec":{"size":"large"}}`, current: `{"spec":{"size":"large","zone":"a"}}`, why: "spec.zone is owned"},
		{name: "below spec: a field set without spec", path: []string{"spec"}, owned: []string{`{"f:metadata":{"f:name":{}}}`},
			desired: `{"spec":{"size":"large"}}`, current: `{"spec":{"size":"large","zone":"a"}}`},
		{name: "below spec: desired has none, current has one", path: []string{"spec"},
			desired: `{}`, current: `{"spec":{"size":"large"}}`, why: "spec is set, want it unset"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var owned []map[string]any
			for _, o := range tt.owned {
				owned = append(owned, decodeMap(t, o))
			}
			why := Change(decodeMap(t, tt.desired), decodeMap(t, tt.current), owned, tt.path...)
			if (why == "") != (tt.why == "") || !strings.Contains(why, tt.why) {
				t.Errorf("Change = %q, want %q", why, tt.why)
			}
		})
	}
}
