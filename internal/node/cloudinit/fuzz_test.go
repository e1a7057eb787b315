package cloudinit

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// FuzzParse checks that Parse never panics, that planning what it accepts is
// deterministic, and that no planned file lands outside the machine root.
// Seeds: the documents under testdata/ plus a few edge cases.
func FuzzParse(f *testing.F) {
	files, err := filepath.Glob("testdata/*.yaml")
	if err != nil || len(files) == 0 {
		f.Fatalf("no seeds: %v", err)
	}
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{
		"",
		"#cloud-config",
		"#cloud-config\nwrite_files:\n- {path: /a/../b, permissions: '0x44'}\n",
		"## template: jinja\n#cloud-config\nruncmd: ['echo {{ ds.meta_data.hostname }} {{ nope }}']\n",
		"#cloud-config\nusers: 'default, a'\nntp:\nmounts: [[a, b]]\ndisk_setup: {/dev/x: {layout: [50, 50]}}\n",
		"#cloud-config\nwrite_files:\n- {path: /x, encoding: gz+b64, content: H4sIAAAAAAAA/w==}\n",
	} {
		f.Add([]byte(s))
	}
	const root = "/machines/m"
	opts := Options{Root: root, Hostname: "m-0"}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse(data)
		if err != nil {
			if cfg != nil {
				t.Fatalf("config returned with error %v", err)
			}
			if err.Error() == "" {
				t.Fatal("empty error message")
			}
			return
		}
		a, errA := Plan(cfg, opts)
		b, errB := Plan(cfg, opts)
		if (errA == nil) != (errB == nil) || (errA != nil && errA.Error() != errB.Error()) {
			t.Fatalf("plan errors differ: %v / %v", errA, errB)
		}
		if !reflect.DeepEqual(a, b) {
			t.Fatal("plan is not deterministic")
		}
		// Re-parsing the same bytes gives the same plan.
		cfg2, err := Parse(data)
		if err != nil {
			t.Fatalf("second parse failed: %v", err)
		}
		if c, _ := Plan(cfg2, opts); !reflect.DeepEqual(a, c) {
			t.Fatal("re-parse gives a different plan")
		}
		if errA != nil {
			return
		}
		if _, ok := a[len(a)-1].(MarkComplete); !ok {
			t.Fatal("plan does not end with MarkComplete")
		}
		for _, s := range a {
			if w, ok := s.(WriteFile); ok {
				if !within(root, w.Path) || w.Path == root || strings.Contains(w.Path, "/../") {
					t.Fatalf("%s escapes the root: %q", w.Source, w.Path)
				}
			}
		}
	})
}
