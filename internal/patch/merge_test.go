package patch

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

func TestMerge(t *testing.T) {
	p := Merge(map[string]any{
		"metadata": map[string]any{"annotations": map[string]any{`odd"key\u2028`: "true", "gone": nil}},
		"spec":     map[string]any{"replicas": 3},
	})
	if p.Type() != types.MergePatchType {
		t.Errorf("type %s, want %s", p.Type(), types.MergePatchType)
	}
	data, err := p.Data(nil)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"metadata":{"annotations":{"gone":null,"odd\"key\\u2028":"true"}},"spec":{"replicas":3}}`
	if string(data) != want {
		t.Errorf("data %s, want %s", data, want)
	}
	if _, err := Merge(map[string]any{"spec": map[string]any{"bad": make(chan int)}}).Data(nil); err == nil {
		t.Error("a value JSON cannot carry gave no error")
	}
}
