package move

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
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
	return run(ctx, &dirSource{dir: dir, namespace: o.Namespace}, &clusterTarget{c: target, namespace: o.Namespace, uids: map[Key]types.UID{}}, o)
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
	matches, _ := filepath.Glob(filepath.Join(dir, "*_"+fileID(k)+".yaml"))
	return matches
}

type dirTarget struct{ dir string }

func (t *dirTarget) describe() string { return "directory " + t.dir }

func (t *dirTarget) prepare(context.Context, []*unstructured.Unstructured) error {
	return os.MkdirAll(t.dir, 0o700)
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
	if u.GetKind() == "" || u.GetName() == "" {
		return nil, fmt.Errorf("%s: not a Kubernetes object (no kind or name)", path)
	}
	return u, nil
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
	for _, f := range files {
		u, err := readObject(f)
		if err != nil {
			return nil, err
		}
		// Cluster-scoped objects come with every namespace's move, as
		// they went (see discover).
		if s.namespace == "" || u.GetNamespace() == s.namespace || u.GetNamespace() == "" {
			out = append(out, u)
		}
	}
	return out, nil
}

// remove keeps the files: they are the record of what was moved.
func (s *dirSource) remove(context.Context, *unstructured.Unstructured) error { return nil }
