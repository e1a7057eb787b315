package components

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"capstan.dev/capstan/internal/lockfile"
)

// pauseSource is where Kubernetes keeps the pause program's C source.
const pauseSource = "build/pause/linux/pause.c"

// buildPause compiles the pause program of Kubernetes version's source tree
// (the module's copy of it), statically, stamped with the image's tag, and
// returns its path.
func buildPause(ctx context.Context, o Options, version, tag string) (string, error) {
	_, dir, err := download(ctx, o, "k8s.io/kubernetes@"+version)
	if err != nil {
		return "", err
	}
	src, err := os.ReadFile(filepath.Join(dir, pauseSource))
	if err != nil {
		return "", fmt.Errorf("components: the pause program's source: %w", err)
	}
	cc, err := exec.LookPath("gcc")
	if err != nil {
		return "", fmt.Errorf("components: gcc is needed to build the pause program of Kubernetes: install the Debian packages gcc and libc6-dev")
	}
	ccVersion, err := exec.CommandContext(ctx, cc, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("components: gcc --version: %w", err)
	}
	h := sha256.New()
	fmt.Fprintf(h, "pause 1\ntag %s\ncc %s\n", tag, ccVersion)
	h.Write(src)
	final := filepath.Join(o.CacheDir, "parts", "pause-"+hex.EncodeToString(h.Sum(nil))[:16])
	bin := filepath.Join(final, "pause")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if err := os.MkdirAll(filepath.Dir(final), 0o755); err != nil {
		return "", err
	}
	unlock, err := lockfile.Wait(ctx, final+".lock", func() { o.progress("waiting for another process building pause") })
	if err != nil {
		return "", err
	}
	defer unlock()
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	o.progress("building pause " + tag + " from Kubernetes " + version + "'s source")
	tmp, err := os.MkdirTemp(filepath.Dir(final), ".build-pause-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	out, err := exec.CommandContext(ctx, cc, "-Os", "-static", "-Wall", "-Werror", "-DVERSION=v"+tag,
		"-o", filepath.Join(tmp, "pause"), filepath.Join(dir, pauseSource)).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("components: compiling the pause program: %w: %s (a static build needs the Debian package libc6-dev)", err, out)
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, final); err != nil {
		return "", err
	}
	return bin, nil
}
