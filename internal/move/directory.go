package move

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/validation/path"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"capstan.dev/capstan/internal/atomicfile"
)

// ToDirectory moves the clusters of source into dir, one YAML file per
// object named <batch>_<group>_<kind>_<namespace>_<name>.yaml (the batch
// is the creation order), status included; the source is paused, the
// files checked against it, and the source's objects deleted.
func ToDirectory(ctx context.Context, source client.Client, dir string, o Options) error {
	return run(ctx, newClusterSource(source, o), &dirTarget{dir: dir}, o)
}

// FromDirectory creates the objects of a directory written by ToDirectory
// in target, in owner order, and unpauses the Clusters the move paused.
// The files stay.
func FromDirectory(ctx context.Context, dir string, target client.Client, o Options) error {
	return run(ctx, &dirSource{dir: dir, namespace: o.Namespace}, newClusterTarget(target, o), o)
}

// fileID is the part of a file's name that names the object.
func fileID(k Key) string {
	g := k.Group
	if g == "" {
		g = "core"
	}
	return strings.Join([]string{g, k.Kind, k.Namespace, k.Name}, "_")
}

// filesOf lists the files that hold k, whatever their batch.
func filesOf(dir string, k Key) []string {
	matches, _ := filepath.Glob(filepath.Join(globEscape(dir), "*_"+globEscape(fileID(k))+".yaml"))
	return matches
}

// globEscape makes s match itself in a glob pattern: a name such as "a*"
// (Kubernetes allows it for some kinds) must not match other objects' files.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

type dirTarget struct{ dir string }

func (t *dirTarget) describe() string { return "directory " + t.dir }

func (t *dirTarget) prepare(context.Context, []*unstructured.Unstructured) error {
	return os.MkdirAll(t.dir, 0o700)
}

// check makes the directory and writes and removes a probe file in it, and
// refuses a directory holding another move's file of one of the objects.
func (t *dirTarget) check(_ context.Context, objs []*unstructured.Unstructured) error {
	if err := os.MkdirAll(t.dir, 0o700); err != nil {
		return fmt.Errorf("the target directory cannot be made: %w", err)
	}
	probe, err := os.CreateTemp(t.dir, ".capstan-move-probe-*")
	if err != nil {
		return fmt.Errorf("the target directory is not writable: %w", err)
	}
	probe.Close()
	if err := os.Remove(probe.Name()); err != nil {
		return fmt.Errorf("the target directory does not let files be removed: %w", err)
	}
	var problems []string
	for _, src := range objs {
		for _, f := range filesOf(t.dir, keyOf(src)) {
			cp, err := readObject(f)
			if err != nil {
				return err
			}
			if cp.GetAnnotations()[sourceUIDKey] != sourceUIDOf(src) && len(differences(src, cp)) > 0 {
				problems = append(problems, fmt.Sprintf("%s holds %s, not a copy of the source's object", f, keyOf(src)))
			}
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("the target directory holds files of another move: give another directory or remove them:\n  %s", strings.Join(problems, "\n  "))
	}
	return nil
}

// discard removes the file of obj's copy.
func (t *dirTarget) discard(_ context.Context, src *unstructured.Unstructured) (bool, error) {
	found := false
	for _, f := range filesOf(t.dir, keyOf(src)) {
		cp, err := readObject(f)
		if err != nil {
			return found, err
		}
		if cp.GetAnnotations()[sourceUIDKey] != sourceUIDOf(src) {
			continue
		}
		if err := os.Remove(f); err != nil {
			return found, err
		}
		found = true
	}
	return found, nil
}

func (t *dirTarget) has(_ context.Context, k Key) (bool, error) {
	return len(filesOf(t.dir, k)) > 0, nil
}

func (t *dirTarget) put(_ context.Context, src *unstructured.Unstructured, batch int) (bool, error) {
	k := keyOf(src)
	old := filesOf(t.dir, k)
	b, err := yaml.Marshal(portable(src).Object)
	if err != nil {
		return false, err
	}
	name := filepath.Join(t.dir, fmt.Sprintf("%03d_%s.yaml", batch, fileID(k)))
	// Written whole or not at all: a file read back is always complete.
	if err := atomicfile.WriteFile(name, b, 0o600); err != nil {
		return false, err
	}
	for _, f := range old {
		if f != name {
			_ = os.Remove(f)
		}
	}
	return len(old) == 0, nil
}

func (t *dirTarget) differences(_ context.Context, src *unstructured.Unstructured) ([]string, error) {
	files := filesOf(t.dir, keyOf(src))
	if len(files) != 1 {
		return []string{fmt.Sprintf("%d files in %s, want 1", len(files), t.dir)}, nil
	}
	cp, err := readObject(files[0])
	if err != nil {
		return nil, err
	}
	return differences(src, cp), nil
}

func (t *dirTarget) finish(context.Context) ([]Key, error) { return nil, nil }

func readObject(path string) (*unstructured.Unstructured, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	// Through JSON, so that numbers read back as the API server's
	// integers and copies compare equal to their sources.
	j, err := yaml.YAMLToJSON(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(j); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if u.IsList() {
		return nil, fmt.Errorf("%s: a list, not one object: a move directory holds one object per file", path)
	}
	if u.GetKind() == "" || u.GetName() == "" {
		return nil, fmt.Errorf("%s: not a Kubernetes object (no kind or name)", path)
	}
	if err := checkIdentity(u); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return u, nil
}

// checkIdentity refuses an object whose metadata the API server would not
// take, or whose name could not name its file: the getters of an
// unstructured object read a namespace or an owner reference of the wrong
// type as none, which would move the object as cluster-scoped or without
// its owner; and a name holding a slash would write its copy elsewhere.
func checkIdentity(u *unstructured.Unstructured) error {
	meta, err := json.Marshal(u.Object["metadata"])
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(meta))
	dec.DisallowUnknownFields()
	var m metav1.ObjectMeta
	if err := dec.Decode(&m); err != nil {
		return fmt.Errorf("metadata: %w", err)
	}
	gv, err := schema.ParseGroupVersion(u.GetAPIVersion())
	if err != nil {
		return fmt.Errorf("apiVersion: %w", err)
	}
	var problems []string
	if gv.Group != "" {
		problems = append(problems, prefixed("apiVersion group", validation.IsDNS1123Subdomain(gv.Group))...)
	}
	if !validKind.MatchString(u.GetKind()) {
		problems = append(problems, fmt.Sprintf("kind %q: letters and digits, starting with a letter", u.GetKind()))
	}
	if ns := u.GetNamespace(); ns != "" {
		problems = append(problems, prefixed("metadata.namespace", validation.IsDNS1123Label(ns))...)
	}
	problems = append(problems, prefixed("metadata.name", path.IsValidPathSegmentName(u.GetName()))...)
	if len(problems) > 0 {
		return fmt.Errorf("not a valid object: %s", strings.Join(problems, "; "))
	}
	return nil
}

var validKind = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9]*$`)

func prefixed(what string, problems []string) []string {
	out := make([]string, len(problems))
	for i, p := range problems {
		out[i] = what + ": " + p
	}
	return out
}

type dirSource struct{ dir, namespace string }

func (s *dirSource) describe() string { return "directory " + s.dir }

func (s *dirSource) objects(context.Context, bool) ([]*unstructured.Unstructured, error) {
	files, err := filepath.Glob(filepath.Join(s.dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		if _, err := os.Stat(s.dir); err != nil {
			return nil, fmt.Errorf("reading the move directory: %w", err)
		}
	}
	sort.Strings(files)
	var out []*unstructured.Unstructured
	fileOf := map[Key]string{}
	for _, f := range files {
		u, err := readObject(f)
		if err != nil {
			return nil, err
		}
		if other, dup := fileOf[keyOf(u)]; dup {
			return nil, fmt.Errorf("%s and %s both hold %s: remove the one that is not from the move", other, f, keyOf(u))
		}
		fileOf[keyOf(u)] = f
		// Cluster-scoped objects come with every namespace's move, as
		// they went (see discover).
		if s.namespace == "" || u.GetNamespace() == s.namespace || u.GetNamespace() == "" {
			out = append(out, u)
		}
	}
	return out, nil
}

// remove keeps the files: they are the record of what was moved.
func (s *dirSource) remove(context.Context, *unstructured.Unstructured) (bool, error) {
	return false, nil
}

// A directory loses nothing in a move and pauses nothing: it can always be
// undone, and has nothing to unpause.
func (s *dirSource) commit(context.Context, []*unstructured.Unstructured) (bool, error) {
	return false, nil
}
func (s *dirSource) committed([]*unstructured.Unstructured) bool { return false }
func (s *dirSource) unpause(context.Context) ([]Key, error)      { return nil, nil }
func (s *dirSource) paused() int                                 { return 0 }
