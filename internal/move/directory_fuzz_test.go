package move

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzDirectorySource moves a directory of fuzzed files into another
// directory, the whole move (read, plan, write, verify) without an API
// server. The reader either gives objects, which then arrive in the target
// as copies equal to their sources and nowhere outside it, or fails with an
// error that names the file, or, for a plan that cannot be made (a cycle,
// a missing owner), the objects. Never a panic.
func FuzzDirectorySource(f *testing.F) {
	cluster := "apiVersion: cluster.x-k8s.io/v1beta2\nkind: Cluster\nmetadata:\n  name: demo\n  namespace: ns\n  uid: u1\nspec:\n  paused: false\n"
	machine := "apiVersion: cluster.x-k8s.io/v1beta2\nkind: Machine\nmetadata:\n  name: demo-m\n  namespace: ns\n  ownerReferences:\n  - {apiVersion: cluster.x-k8s.io/v1beta2, kind: Cluster, name: demo, uid: u1}\nspec:\n  clusterName: demo\n"
	secret := "apiVersion: v1\nkind: Secret\nmetadata: {name: demo-kubeconfig, namespace: ns}\ndata: {value: YQ==}\n"
	for _, s := range []struct{ a, b, c, ns string }{
		{cluster, machine, secret, ""},
		{cluster, machine, secret, "ns"},
		{cluster, cluster, "", ""},
		{machine, "", "", ""},
		{"kind: X\nmetadata: {name: a, ownerReferences: [{kind: X, name: a}]}\n", "", "", ""},
		{"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ../../escape, namespace: ns}\n", "", "", ""},
		{"apiVersion: v1\nkind: ../x\nmetadata: {name: a}\n", "", "", ""},
		{"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: ../b}\n", "", "", ""},
		{"[1, 2]", "metadata: 5", "kind: 5\nmetadata: {name: [x]}", ""},
		{"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: ns, annotations: {x: 1}}\ndata: {k: 1.0}\n", "", "", ""},
		{"a: &a [*a]", "{", "\t", ""},
		{"apiVersion: v1\nkind: List\nitems: [{kind: ConfigMap, metadata: {name: a}}]\n", "", "", ""},
	} {
		f.Add([]byte(s.a), []byte(s.b), []byte(s.c), s.ns)
	}
	f.Fuzz(func(t *testing.T, a, b, c []byte, namespace string) {
		root := t.TempDir()
		src, dst := filepath.Join(root, "src"), filepath.Join(root, "dst")
		if err := os.Mkdir(src, 0o700); err != nil {
			t.Fatal(err)
		}
		var files []string
		for i, data := range [][]byte{a, b, c} {
			if len(data) == 0 {
				continue
			}
			name := filepath.Join(src, []string{"001_a.yaml", "002_b.yaml", "003_c.yaml"}[i])
			if err := os.WriteFile(name, data, 0o600); err != nil {
				t.Fatal(err)
			}
			files = append(files, name)
		}
		source := &dirSource{dir: src, namespace: namespace}
		err := run(context.Background(), source, &dirTarget{dir: dst}, Options{})
		if entries, _ := os.ReadDir(root); len(entries) > 2 {
			t.Fatalf("the move wrote outside the target directory: %v", entries)
		}
		if err != nil {
			var me *Error
			if !errors.As(err, &me) {
				t.Fatalf("not a move error: %v", err)
			}
			msg := err.Error()
			switch me.Step {
			case "reading the source", "pausing":
				if !namesOneOf(msg, files) {
					t.Fatalf("the reader's error names no file: %v", err)
				}
			case "planning":
				var cycle *CycleError
				var missing *MissingOwnerError
				if !errors.As(err, &cycle) && !errors.As(err, &missing) && !namesOneOf(msg, files) {
					t.Fatalf("a planning error that names neither objects nor files: %v", err)
				}
			default:
				t.Fatalf("a move of readable files failed at %s: %v", me.Step, err)
			}
			if len(me.Changed) > 0 {
				t.Fatalf("a move from a directory changed something: %v", me.Changed)
			}
			return
		}
		objs, err := source.objects(context.Background(), false)
		if err != nil {
			t.Fatalf("the source read once and not twice: %v", err)
		}
		if len(objs) == 0 { // nothing in the namespace: nothing written
			return
		}
		copies, err := (&dirSource{dir: dst}).objects(context.Background(), false)
		if err != nil {
			t.Fatalf("the copies do not read back: %v", err)
		}
		if len(copies) != len(objs) {
			t.Fatalf("%d objects moved into %d copies", len(objs), len(copies))
		}
	})
}

func namesOneOf(msg string, files []string) bool {
	for _, f := range files {
		if strings.Contains(msg, f) {
			return true
		}
	}
	return false
}
