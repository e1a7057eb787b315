package names_test

import (
	"strings"
	"testing"

	"capstan.dev/capstan/internal/names"
)

func counting() names.Random {
	n := 0
	return func(length int) string {
		n++
		return strings.Repeat(string(rune('a'+n-1)), length)
	}
}

func TestRender(t *testing.T) {
	data := map[string]any{"cluster": map[string]any{"name": "c1"}}
	for _, tt := range []struct {
		name, template string
		data           map[string]any
		want, wantErr  string
	}{
		{name: "random and data", template: "{{ .cluster.name }}-{{ .random }}", data: data, want: "c1-aaaaa"},
		{name: "no random used", template: "{{ .cluster.name }}-x", data: data, want: "c1-x"},
		{name: "long names cut to 58 and a fresh suffix", template: strings.Repeat("n", 70) + "{{ .random }}", want: strings.Repeat("n", 58) + "bbbbb"},
		{name: "missing key", template: "{{ .cluster.nope }}", data: data, wantErr: "cannot be rendered"},
		{name: "broken", template: "{{ .cluster", wantErr: "cannot be parsed"},
		{name: "invalid name", template: "UPPER", wantErr: `renders "UPPER", which is not a valid object name`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := names.Render(tt.template, tt.data, counting())
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %q, %v; want an error containing %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestWithPrefix(t *testing.T) {
	if got := names.WithPrefix("c1-md-", counting()); got != "c1-md-aaaaa" {
		t.Errorf("got %q", got)
	}
	long := strings.Repeat("p", 80)
	if got := names.WithPrefix(long, counting()); got != strings.Repeat("p", 58)+"aaaaa" {
		t.Errorf("got %q (%d characters), want 63", got, len(got))
	}
}
