package components

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"capstan.dev/capstan/internal/lockfile"
)

// Options say where built parts are kept and how to report progress.
type Options struct {
	// CacheDir holds the built parts (the QEMU provider's image cache).
	CacheDir string
	// Progress, if set, is told each step as it starts ("building etcd
	// v3.6.6 from the Go module proxy", …).
	Progress func(step string)
	// Go is the go command; "go" on PATH when empty.
	Go string
}

func (o Options) progress(step string) {
	if o.Progress != nil {
		o.Progress(step)
	}
}

func (o Options) goCommand() string {
	if o.Go != "" {
		return o.Go
	}
	return "go"
}

// Part is one build: a module the go command resolves, and the main
// packages it builds into one directory (each binary named after its
// package's last path element; "." after the module, Name).
type Part struct {
	// Name names the part in the cache and in progress ("etcd").
	Name string
	// Version is what progress says is being built ("v3.6.6").
	Version string
	// Requires are the module's requirements, "path version" each.
	Requires []string
	// Replaces are its replace directives, "old => new version" each.
	Replaces []string
	// Main is the source of the module's own main.go; empty when every
	// package built is a main package of a required module.
	Main string
	// Packages are the main packages built ("." for Main).
	Packages []string
	// Tags are build tags.
	Tags []string
	// LDFlags are the linker flags (version stamps, -s -w).
	LDFlags string
	// CGO builds with cgo (a static binary: -extldflags -static).
	CGO bool
}

// modulePath is the build module's own path.
func (p Part) modulePath() string { return "capstan.local/" + p.Name }

// goMod is the build module's go.mod before the go command resolves it.
func (p Part) goMod(goVersion string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "module %s\n\ngo %s\n", p.modulePath(), goVersion)
	if len(p.Requires) > 0 {
		b.WriteString("\nrequire (\n")
		for _, r := range p.Requires {
			b.WriteString("\t" + r + "\n")
		}
		b.WriteString(")\n")
	}
	if len(p.Replaces) > 0 {
		b.WriteString("\nreplace (\n")
		for _, r := range p.Replaces {
			b.WriteString("\t" + r + "\n")
		}
		b.WriteString(")\n")
	}
	return b.String()
}

// tools is a file, in a directory of its own, that only the go command's
// module resolution reads (its build tag is never set): it imports the
// required modules' main packages, so that go mod tidy keeps what building
// them needs.
func (p Part) tools() string {
	var b strings.Builder
	b.WriteString("//go:build capstan_tools\n\npackage tools\n\nimport (\n")
	for _, pkg := range p.Packages {
		if pkg != "." {
			fmt.Fprintf(&b, "\t_ %q\n", pkg)
		}
	}
	b.WriteString(")\n")
	return b.String()
}

// Binaries are the names of the programs the part builds.
func (p Part) Binaries() []string {
	names := make([]string, 0, len(p.Packages))
	for _, pkg := range p.Packages {
		if pkg == "." {
			names = append(names, p.Name)
			continue
		}
		names = append(names, pkg[strings.LastIndex(pkg, "/")+1:])
	}
	return names
}

// key names the part's build in the cache: everything that decides the
// binaries' content.
func (p Part) key(toolchain string) string {
	h := sha256.New()
	fmt.Fprintf(h, "part 1\ntoolchain %s\n%s\n", toolchain, p.goMod("-"))
	fmt.Fprintf(h, "main %q\npackages %q\ntags %q\nldflags %q\ncgo %v\n", p.Main, p.Packages, p.Tags, p.LDFlags, p.CGO)
	return p.Name + "-" + hex.EncodeToString(h.Sum(nil))[:16]
}

// Build returns the directory holding the part's binaries, building them
// first when the cache has none for this recipe and toolchain.
func Build(ctx context.Context, o Options, p Part) (string, error) {
	if o.CacheDir == "" {
		return "", errors.New("components: Options.CacheDir is empty: set the directory built parts are kept in")
	}
	toolchain, err := goEnv(ctx, o, "GOVERSION")
	if err != nil {
		return "", err
	}
	partsDir := filepath.Join(o.CacheDir, "parts")
	if err := os.MkdirAll(partsDir, 0o755); err != nil {
		return "", err
	}
	final := filepath.Join(partsDir, p.key(toolchain))
	if complete(final, p) {
		return final, nil
	}
	unlock, err := lockfile.Wait(ctx, final+".lock", func() {
		o.progress("waiting for another process building " + p.Name)
	})
	if err != nil {
		return "", err
	}
	defer unlock()
	if complete(final, p) {
		return final, nil
	}
	o.progress(fmt.Sprintf("building %s %s from the Go module proxy", p.Name, p.Version))
	tmp, err := os.MkdirTemp(partsDir, ".build-"+p.Name+"-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	if err := build(ctx, o, p, tmp, toolchain); err != nil {
		return "", fmt.Errorf("components: building %s %s: %w", p.Name, p.Version, err)
	}
	if err := os.Chmod(filepath.Join(tmp, "bin"), 0o755); err != nil {
		return "", err
	}
	if err := os.Rename(filepath.Join(tmp, "bin"), final); err != nil {
		return "", err
	}
	return final, nil
}

// complete tells whether dir holds every binary of p.
func complete(dir string, p Part) bool {
	for _, b := range p.Binaries() {
		if info, err := os.Stat(filepath.Join(dir, b)); err != nil || !info.Mode().IsRegular() {
			return false
		}
	}
	return true
}

// build writes p's module into dir/src, resolves it and builds its
// binaries into dir/bin.
func build(ctx context.Context, o Options, p Part, dir, toolchain string) error {
	src := filepath.Join(dir, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return err
	}
	goVersion := strings.TrimPrefix(toolchain, "go")
	if parts := strings.SplitN(goVersion, ".", 3); len(parts) == 3 {
		goVersion = parts[0] + "." + parts[1]
	}
	files := map[string]string{"go.mod": p.goMod(goVersion), "tools/tools.go": p.tools()}
	if p.Main != "" {
		files["main.go"] = p.Main
	}
	if err := os.MkdirAll(filepath.Join(src, "tools"), 0o755); err != nil {
		return err
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(src, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	if err := goRun(ctx, o, src, p.CGO, "mod", "tidy"); err != nil {
		return err
	}
	args := []string{"build", "-trimpath", "-o", filepath.Join(dir, "bin") + "/"}
	if len(p.Tags) > 0 {
		args = append(args, "-tags", strings.Join(p.Tags, ","))
	}
	ldflags := p.LDFlags
	if p.CGO {
		ldflags = strings.TrimSpace(ldflags + " -extldflags -static")
	}
	if ldflags != "" {
		args = append(args, "-ldflags", ldflags)
	}
	args = append(args, p.Packages...)
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		return err
	}
	return goRun(ctx, o, src, p.CGO, args...)
}

// goRun runs the go command in dir for a build module: no workspace, the
// module's own go.mod and go.sum only, and the toolchain at hand (never one
// the module asks to download).
func goRun(ctx context.Context, o Options, dir string, cgo bool, args ...string) error {
	cmd := exec.CommandContext(ctx, o.goCommand(), args...)
	cmd.Dir = dir
	cmd.Env = append(slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "GOFLAGS=") || strings.HasPrefix(kv, "GOWORK=") ||
			strings.HasPrefix(kv, "CGO_ENABLED=") || strings.HasPrefix(kv, "GOTOOLCHAIN=")
	}), "GOFLAGS=-mod=mod -buildvcs=false", "GOWORK=off", "GOTOOLCHAIN=local", "CGO_ENABLED="+map[bool]string{true: "1", false: "0"}[cgo])
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 30 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		tail := string(out)
		if len(tail) > 4000 {
			tail = "…" + tail[len(tail)-4000:]
		}
		return fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, tail)
	}
	return nil
}

// goEnv returns one of the go command's settings.
func goEnv(ctx context.Context, o Options, name string) (string, error) {
	out, err := exec.CommandContext(ctx, o.goCommand(), "env", name).Output()
	if err != nil {
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) {
			return "", fmt.Errorf("components: go env %s: %w: %s", name, err, exitErr.Stderr)
		}
		return "", fmt.Errorf("components: the go command is needed to build the node's programs from the Go module proxy: %w (install Go, or put it on PATH)", err)
	}
	return strings.TrimSpace(string(out)), nil
}
