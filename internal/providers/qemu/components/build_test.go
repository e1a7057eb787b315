package components

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// hello is a part that builds in seconds: its own main, one requirement
// from the module proxy (already in the module cache of any machine that
// builds Capstan).
func hello(greeting string) Part {
	return Part{
		Name: "hello", Version: "v0",
		Requires: []string{"golang.org/x/mod v0.37.0"},
		Main: "package main\n\nimport (\n\t\"fmt\"\n\n\t\"golang.org/x/mod/semver\"\n)\n\n" +
			"var greeting = \"unset\"\n\nfunc main() { fmt.Println(greeting, semver.Major(\"v1.35.8\")) }\n",
		Packages: []string{".", "golang.org/x/mod/gosumcheck"},
		LDFlags:  "-X main.greeting=" + greeting,
	}
}

// A part is built once: the second Build finds it in the cache without
// building, and a changed recipe is a new build beside it.
func TestBuildCachesByRecipe(t *testing.T) {
	if testing.Short() {
		t.Skip("builds Go programs")
	}
	ctx := context.Background()
	var steps []string
	o := Options{CacheDir: t.TempDir(), Progress: func(s string) { steps = append(steps, s) }}
	dir, err := Build(ctx, o, hello("hi"))
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) != 1 || steps[0] != "building hello v0 from the Go module proxy" {
		t.Errorf("progress of the first build: %q", steps)
	}
	out, err := exec.Command(filepath.Join(dir, "hello")).Output()
	if err != nil || string(out) != "hi v1\n" {
		t.Fatalf("the built program printed %q (%v); want %q", out, err, "hi v1\n")
	}
	if info, err := os.Stat(filepath.Join(dir, "gosumcheck")); err != nil || info.Mode()&0o111 == 0 {
		t.Fatalf("the required module's main package was not built: %v", err)
	}
	steps = nil
	again, err := Build(ctx, o, hello("hi"))
	if err != nil || again != dir || len(steps) != 0 {
		t.Fatalf("second Build: %s, %v, progress %q; want the cached %s without a build", again, err, steps, dir)
	}
	other, err := Build(ctx, o, hello("ho"))
	if err != nil {
		t.Fatal(err)
	}
	if other == dir {
		t.Fatal("a changed recipe (its linker flags) was answered from the cache of the old one")
	}
	if out, _ := exec.Command(filepath.Join(other, "hello")).Output(); string(out) != "ho v1\n" {
		t.Fatalf("the rebuilt program printed %q", out)
	}
	entries, _ := os.ReadDir(filepath.Join(o.CacheDir, "parts"))
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".build-") {
			t.Errorf("a build directory was left behind: %s", e.Name())
		}
	}
}

// A build that fails says which part and what the go command said, and
// leaves nothing in the cache.
func TestBuildFailureNamesThePart(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	o := Options{CacheDir: t.TempDir()}
	p := hello("x")
	p.Main = "package main\n\nfunc main() { undefinedThing() }\n"
	_, err := Build(context.Background(), o, p)
	if err == nil || !strings.Contains(err.Error(), "building hello v0") || !strings.Contains(err.Error(), "undefinedThing") {
		t.Fatalf("err = %v; want it to name the part and the compiler's message", err)
	}
	entries, _ := os.ReadDir(filepath.Join(o.CacheDir, "parts"))
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".lock") {
			t.Errorf("a failed build left %s in the cache", e.Name())
		}
	}
}

func TestGoModAndBinaries(t *testing.T) {
	p := Part{
		Name:     "containerd",
		Requires: []string{"github.com/containerd/containerd/v2 v2.3.7"},
		Replaces: []string{"k8s.io/api => k8s.io/api v0.35.8"},
		Packages: []string{"github.com/containerd/containerd/v2/cmd/containerd", "github.com/containerd/containerd/v2/cmd/ctr"},
	}
	want := "module capstan.local/containerd\n\ngo 1.26\n\nrequire (\n\tgithub.com/containerd/containerd/v2 v2.3.7\n)\n\nreplace (\n\tk8s.io/api => k8s.io/api v0.35.8\n)\n"
	if got := p.goMod("1.26"); got != want {
		t.Errorf("goMod:\n%s\nwant:\n%s", got, want)
	}
	if got := strings.Join(p.Binaries(), ","); got != "containerd,ctr" {
		t.Errorf("Binaries = %s", got)
	}
	if !strings.Contains(p.tools(), "_ \"github.com/containerd/containerd/v2/cmd/ctr\"") {
		t.Errorf("tools.go does not import the packages to build:\n%s", p.tools())
	}
	if got := strings.Join(Part{Name: "kube", Packages: []string{"."}}.Binaries(), ","); got != "kube" {
		t.Errorf("the module's own main is named %s; want kube", got)
	}
	base := p.key("go1.26.8")
	for name, changed := range map[string]Part{
		"toolchain": p,
		"tags":      func() Part { q := p; q.Tags = []string{"no_btrfs"}; return q }(),
		"replace":   func() Part { q := p; q.Replaces = nil; return q }(),
		"cgo":       func() Part { q := p; q.CGO = true; return q }(),
	} {
		toolchain := "go1.26.8"
		if name == "toolchain" {
			toolchain = "go1.26.9"
		}
		if changed.key(toolchain) == base {
			t.Errorf("a change of %s keeps the cache key", name)
		}
	}
}

func TestKubeVersionFlags(t *testing.T) {
	flags := kubeVersionFlags("v1.35.8", "35")
	for _, want := range []string{
		"-X k8s.io/component-base/version.gitVersion=v1.35.8",
		"-X k8s.io/client-go/pkg/version.gitVersion=v1.35.8",
		"-X k8s.io/component-base/version.gitMinor=35",
	} {
		if !strings.Contains(flags, want) {
			t.Errorf("%q lacks %q", flags, want)
		}
	}
}

func TestEnsureRefusesAVersionThatIsNotARelease(t *testing.T) {
	for _, v := range []string{"1.35.8", "v1.35", "v1.35.8-rc.0", "latest"} {
		if _, err := Ensure(context.Background(), Options{CacheDir: t.TempDir()}, v); err == nil || !strings.Contains(err.Error(), "v1.MINOR.PATCH") {
			t.Errorf("Ensure(%q) = %v; want a refusal that says the form", v, err)
		}
	}
}
