package crd_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"capstan.dev/capstan/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

// The corpus sizes the foundation promises; shrinking the corpus fails.
const (
	minInvalid = 40
	minValid   = 15
)

// corpusFile is one manifest of the corpus: its YAML documents and the
// substrings the API server's refusal must contain.
type corpusFile struct {
	path   string
	expect []string
	docs   []*unstructured.Unstructured
}

func loadCorpus(t *testing.T, dir string) []corpusFile {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(paths)
	var files []corpusFile
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		f := corpusFile{path: p}
		for _, line := range strings.Split(string(raw), "\n") {
			if rest, ok := strings.CutPrefix(line, "# expect:"); ok {
				f.expect = append(f.expect, strings.TrimSpace(rest))
			}
		}
		reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
		for {
			doc, err := reader.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			obj := map[string]any{}
			if err := utilyaml.Unmarshal(doc, &obj); err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			if len(obj) == 0 {
				continue
			}
			f.docs = append(f.docs, &unstructured.Unstructured{Object: obj})
		}
		if len(f.docs) == 0 {
			t.Fatalf("%s holds no object", p)
		}
		files = append(files, f)
	}
	return files
}

// apply creates obj, or replaces it when an object of the same kind and name
// exists: that is how a corpus file tests a change to a stored object.
func apply(ctx context.Context, c client.Client, obj *unstructured.Unstructured) error {
	current := &unstructured.Unstructured{}
	current.SetGroupVersionKind(obj.GroupVersionKind())
	err := c.Get(ctx, client.ObjectKeyFromObject(obj), current)
	if apierrors.IsNotFound(err) {
		return c.Create(ctx, obj)
	}
	if err != nil {
		return err
	}
	obj.SetResourceVersion(current.GetResourceVersion())
	return c.Update(ctx, obj)
}

// eachCorpusFile runs check on every manifest of a corpus directory, each in
// a parallel subtest with a namespace of its own, after checking that the
// corpus has not shrunk below min.
func eachCorpusFile(t *testing.T, dir string, min int, check func(t *testing.T, ctx context.Context, ns string, f corpusFile)) {
	files := loadCorpus(t, dir)
	if len(files) < min {
		t.Errorf("%s corpus has %d manifests, want at least %d", dir, len(files), min)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f.path), ".yaml"), func(t *testing.T) {
			t.Parallel()
			check(t, context.Background(), env.Namespace(t), f)
		})
	}
}

func TestCorpusInvalidIsRefused(t *testing.T) {
	eachCorpusFile(t, "invalid", minInvalid, func(t *testing.T, ctx context.Context, ns string, f corpusFile) {
		if len(f.expect) == 0 {
			t.Fatalf("%s has no '# expect:' line naming what the refusal must say", f.path)
		}
		for i, doc := range f.docs {
			doc.SetNamespace(ns)
			err := apply(ctx, env.Client, doc)
			last := i == len(f.docs)-1
			if !last {
				if err != nil {
					t.Fatalf("setup object %d (%s %s) was refused: %v", i+1, doc.GetKind(), doc.GetName(), err)
				}
				continue
			}
			if err == nil {
				t.Fatalf("%s %s was accepted; want it refused with a message containing %q", doc.GetKind(), doc.GetName(), f.expect)
			}
			if !apierrors.IsInvalid(err) && !apierrors.IsBadRequest(err) {
				t.Fatalf("refused for the wrong reason (want a validation error): %v", err)
			}
			for _, want := range f.expect {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("refusal does not mention %q:\n%v", want, err)
				}
			}
		}
	})
}

func TestCorpusValidIsAcceptedUnchanged(t *testing.T) {
	eachCorpusFile(t, "valid", minValid, func(t *testing.T, ctx context.Context, ns string, f corpusFile) {
		for _, doc := range f.docs {
			doc.SetNamespace(ns)
			want := doc.DeepCopy()
			if err := env.Client.Create(ctx, doc); err != nil {
				t.Fatalf("%s %s was refused: %v", doc.GetKind(), doc.GetName(), err)
			}
			got := &unstructured.Unstructured{}
			got.SetGroupVersionKind(doc.GroupVersionKind())
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(doc), got); err != nil {
				t.Fatal(err)
			}
			for _, d := range subsetDiff("", want.Object, got.Object) {
				t.Errorf("%s %s: %s", doc.GetKind(), doc.GetName(), d)
			}
		}
	})
}

// subsetDiff lists every value set in want that reads back differently in
// got. Fields the server adds (defaults, metadata) are not differences.
func subsetDiff(path string, want, got any) []string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: want an object, read back %T", path, got)}
		}
		var diffs []string
		for k, wv := range w {
			gv, ok := g[k]
			if !ok {
				diffs = append(diffs, fmt.Sprintf("%s.%s: set to %v, missing on read-back (pruned?)", path, k, wv))
				continue
			}
			diffs = append(diffs, subsetDiff(path+"."+k, wv, gv)...)
		}
		return diffs
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return []string{fmt.Sprintf("%s: want %v, read back %v", path, want, got)}
		}
		var diffs []string
		for i := range w {
			diffs = append(diffs, subsetDiff(fmt.Sprintf("%s[%d]", path, i), w[i], g[i])...)
		}
		return diffs
	default:
		if wn, ok := number(want); ok {
			if gn, ok := number(got); ok && wn == gn {
				return nil
			}
		}
		if !reflect.DeepEqual(want, got) {
			return []string{fmt.Sprintf("%s: want %v (%T), read back %v (%T)", path, want, want, got, got)}
		}
		return nil
	}
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case int:
		return float64(n), true
	case float64:
		return n, true
	}
	return 0, false
}
