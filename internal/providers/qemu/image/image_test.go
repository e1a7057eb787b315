package image

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"capstan.dev/capstan/internal/providers/qemu/components"
)

func TestEnsureNodeRefusesBadOptions(t *testing.T) {
	if _, err := EnsureNode(context.Background(), NodeOptions{KubernetesVersion: "v1.35.8"}); err == nil || !strings.Contains(err.Error(), "CacheDir") {
		t.Errorf("no CacheDir: error %v, want one naming it", err)
	}
}

// The recipe ID changes with anything that changes the image: the package
// list, a built program, an image reference; and only with those.
func TestNodeRecipeID(t *testing.T) {
	node := components.Node{
		KubernetesVersion: "v1.35.8", Kube: "/c/kube-abc/kube", Etcd: "/c/etcd-abc/etcd", CoreDNS: "/c/coredns-abc/coredns",
		Pause: "/c/pause-abc/pause", ContainerdDir: "/c/containerd-abc/bin", Crictl: "/c/crictl-abc/crictl", Echo: "/c/echo-abc/echo",
		Images: map[string]string{"pause": "registry.k8s.io/pause:3.10.1", components.EchoImageKey: "capstan.dev/echo:1"},
	}
	id := nodeRecipeID(node)
	if !strings.HasPrefix(id, "node-v1.35.8-") || id != nodeRecipeID(node) {
		t.Errorf("nodeRecipeID %q is not stable", id)
	}
	saved := Packages
	defer func() { Packages = saved }()
	Packages = append(append([]string(nil), saved...), "htop")
	if nodeRecipeID(node) == id {
		t.Error("another package list, the same recipe ID")
	}
	Packages = saved
	other := node
	other.Kube = "/c/kube-def/kube"
	if nodeRecipeID(other) == id {
		t.Error("another Kubernetes build, the same recipe ID")
	}
	other = node
	other.Images = map[string]string{"pause": "registry.k8s.io/pause:3.10.1", components.EchoImageKey: "capstan.dev/echo:2"}
	if nodeRecipeID(other) == id {
		t.Error("another echo image, the same recipe ID")
	}
}

func TestUnescapeMountPath(t *testing.T) {
	if got := unescapeMountPath(`/a\040b\134c`); got != `/a b\c` {
		t.Errorf("got %q", got)
	}
	mounts, err := mountsUnder(t.TempDir())
	if err != nil || len(mounts) != 0 {
		t.Errorf("mounts under a new directory: %v, %v", mounts, err)
	}
}

// MissingTools names each absent program once, however many of the joined
// lists name it, and never a program on PATH.
func TestMissingToolsNamesEachOnce(t *testing.T) {
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "present"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin)
	got := MissingTools("absent-a", "present", "absent-b", "absent-a")
	if strings.Join(got, ",") != "absent-a,absent-b" {
		t.Errorf("MissingTools = %v, want [absent-a absent-b]", got)
	}
}
