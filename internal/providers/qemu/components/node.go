package components

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	"golang.org/x/mod/modfile"
)

// The versions of the node's programs that the Kubernetes version does not
// decide. containerd: the 2.3 line is a long-term release, supported with
// Kubernetes 1.35 (containerd's release table; Debian bookworm's 1.6.20 is
// below what it lists for 1.31 and later, and 1.6 is past its end of life).
// crictl: the newest cri-tools the module proxy serves at or below 1.35.
const (
	ContainerdVersion = "v2.3.7"
	CrictlVersion     = "v1.34.0"
)

// KubePrograms are the programs of the Kubernetes multi-call binary: a node
// runs each as a symbolic link of that name to it.
var KubePrograms = []string{
	"kubeadm", "kubelet", "kubectl",
	"kube-apiserver", "kube-controller-manager", "kube-scheduler", "kube-proxy",
}

//go:embed kubemain.go.in
var kubeMain string

// Node is what a node of one Kubernetes version runs, built on the host.
type Node struct {
	KubernetesVersion string
	// Kube is the multi-call binary of KubePrograms.
	Kube string
	// Etcd, CoreDNS and Pause are the programs of kubeadm's images of
	// those names.
	Etcd, CoreDNS, Pause string
	// ContainerdDir holds containerd, containerd-shim-runc-v2 and ctr.
	ContainerdDir string
	// ContainerdUnit is containerd's own systemd unit file, from its
	// module's source.
	ContainerdUnit string
	// Crictl is the CRI command-line client.
	Crictl string
	// Echo is the program of EchoImage, the end-to-end tests' workload.
	Echo string
	// Images are the image references kubeadm of this version pulls, by
	// component: kube-apiserver, kube-controller-manager, kube-scheduler,
	// kube-proxy, etcd, coredns, pause; and under EchoImageKey ("echo"),
	// EchoImage, which no kubeadm pulls but a node holds all the same.
	Images map[string]string
}

var kubernetesVersion = regexp.MustCompile(`^v1\.(\d+)\.(\d+)$`)

// Ensure builds (or finds in the cache) everything a node of the given
// Kubernetes version ("v1.35.8") runs.
func Ensure(ctx context.Context, o Options, version string) (Node, error) {
	m := kubernetesVersion.FindStringSubmatch(version)
	if m == nil {
		return Node{}, fmt.Errorf("components: Kubernetes version %q: want a release version v1.MINOR.PATCH, such as v1.35.8", version)
	}
	n := Node{KubernetesVersion: version}
	replaces, err := stagingReplaces(ctx, o, version, "v0."+m[1]+"."+m[2])
	if err != nil {
		return Node{}, err
	}
	dir, err := Build(ctx, o, Part{
		Name: "kube", Version: version,
		Requires: []string{"k8s.io/kubernetes " + version},
		Replaces: replaces,
		Main:     kubeMain,
		Packages: []string{"."},
		LDFlags:  kubeVersionFlags(version, m[1]),
	})
	if err != nil {
		return Node{}, err
	}
	n.Kube = filepath.Join(dir, "kube")
	if n.Images, err = kubeadmImages(ctx, n.Kube, version); err != nil {
		return Node{}, err
	}
	etcdVersion := "v" + strings.SplitN(tagOf(n.Images["etcd"]), "-", 2)[0]
	if dir, err = Build(ctx, o, Part{
		Name: "etcd", Version: etcdVersion,
		Requires: []string{"go.etcd.io/etcd/server/v3 " + etcdVersion},
		Main:     "package main\n\nimport (\n\t\"os\"\n\n\t\"go.etcd.io/etcd/server/v3/etcdmain\"\n)\n\nfunc main() { etcdmain.Main(os.Args) }\n",
		Packages: []string{"."},
		LDFlags:  "-s -w",
	}); err != nil {
		return Node{}, err
	}
	n.Etcd = filepath.Join(dir, "etcd")
	corednsVersion := tagOf(n.Images["coredns"])
	if dir, err = Build(ctx, o, Part{
		Name: "coredns", Version: corednsVersion,
		Requires: []string{"github.com/coredns/coredns " + corednsVersion},
		Packages: []string{"github.com/coredns/coredns"},
		LDFlags:  "-s -w",
	}); err != nil {
		return Node{}, err
	}
	n.CoreDNS = filepath.Join(dir, "coredns")
	if dir, err = Build(ctx, o, ContainerdPart()); err != nil {
		return Node{}, err
	}
	n.ContainerdDir = dir
	_, containerdSource, err := download(ctx, o, "github.com/containerd/containerd/v2@"+ContainerdVersion)
	if err != nil {
		return Node{}, err
	}
	n.ContainerdUnit = filepath.Join(containerdSource, "containerd.service")
	if dir, err = Build(ctx, o, Part{
		Name: "crictl", Version: CrictlVersion,
		Requires: []string{"sigs.k8s.io/cri-tools " + CrictlVersion},
		Packages: []string{"sigs.k8s.io/cri-tools/cmd/crictl"},
		LDFlags:  "-s -w -X sigs.k8s.io/cri-tools/pkg/version.Version=" + CrictlVersion,
	}); err != nil {
		return Node{}, err
	}
	n.Crictl = filepath.Join(dir, "crictl")
	if n.Pause, err = buildPause(ctx, o, version, tagOf(n.Images["pause"])); err != nil {
		return Node{}, err
	}
	if dir, err = Build(ctx, o, EchoPart()); err != nil {
		return Node{}, err
	}
	n.Echo = filepath.Join(dir, "echo")
	n.Images[EchoImageKey] = EchoImage
	return n, nil
}

// ContainerdPart builds containerd, its runc shim and ctr. Without cgo,
// and without the snapshotters that need it (btrfs, devmapper, zfs): the
// node uses overlayfs.
func ContainerdPart() Part {
	return Part{
		Name: "containerd", Version: ContainerdVersion,
		Requires: []string{"github.com/containerd/containerd/v2 " + ContainerdVersion},
		Packages: []string{
			"github.com/containerd/containerd/v2/cmd/containerd",
			"github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2",
			"github.com/containerd/containerd/v2/cmd/ctr",
		},
		Tags: []string{"no_btrfs", "no_devmapper", "no_zfs"},
		LDFlags: "-s -w -X github.com/containerd/containerd/v2/version.Version=" + ContainerdVersion +
			" -X github.com/containerd/containerd/v2/version.Package=github.com/containerd/containerd/v2",
	}
}

// kubeVersionFlags stamps the Kubernetes binary with its version, as
// upstream's release build does: kubeadm compares the versions of the
// programs it drives, and every component reports it.
func kubeVersionFlags(version, minor string) string {
	var flags []string
	for _, pkg := range []string{"k8s.io/component-base/version", "k8s.io/client-go/pkg/version"} {
		for _, kv := range [][2]string{
			{"gitVersion", version}, {"gitMajor", "1"}, {"gitMinor", minor},
			{"gitTreeState", "clean"}, {"buildDate", "1970-01-01T00:00:00Z"},
		} {
			flags = append(flags, "-X "+pkg+"."+kv[0]+"="+kv[1])
		}
	}
	return "-s -w " + strings.Join(flags, " ")
}

// stagingReplaces are the replace directives that point each Kubernetes
// staging module (k8s.io/api, k8s.io/client-go, …) at its release of the
// given version: k8s.io/kubernetes's own go.mod points them at its source
// tree, which a module that requires it cannot see.
func stagingReplaces(ctx context.Context, o Options, version, stagingVersion string) ([]string, error) {
	goMod, _, err := download(ctx, o, "k8s.io/kubernetes@"+version)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(goMod)
	if err != nil {
		return nil, err
	}
	f, err := modfile.Parse(goMod, data, nil)
	if err != nil {
		return nil, fmt.Errorf("components: k8s.io/kubernetes %s's go.mod: %w", version, err)
	}
	var replaces []string
	for _, r := range f.Replace {
		if strings.HasPrefix(r.New.Path, "./staging/") {
			replaces = append(replaces, r.Old.Path+" => "+r.Old.Path+" "+stagingVersion)
		}
	}
	if len(replaces) == 0 {
		return nil, fmt.Errorf("components: k8s.io/kubernetes %s's go.mod names no staging module", version)
	}
	return replaces, nil
}

// download fetches a module version into the module cache and returns its
// go.mod file and source directory.
func download(ctx context.Context, o Options, moduleVersion string) (goMod, dir string, err error) {
	cmd := exec.CommandContext(ctx, o.goCommand(), "mod", "download", "-json", moduleVersion)
	cmd.Dir = os.TempDir() // outside any module: nothing to resolve but the argument
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var info struct{ GoMod, Dir, Error string }
	if jsonErr := json.Unmarshal(out, &info); jsonErr == nil && info.Error != "" {
		return "", "", fmt.Errorf("components: downloading %s from the Go module proxy: %s", moduleVersion, info.Error)
	}
	if err != nil {
		return "", "", fmt.Errorf("components: downloading %s from the Go module proxy: %w: %s", moduleVersion, err, stderr.String())
	}
	return info.GoMod, info.Dir, nil
}

// kubeadmImages asks the built kubeadm which images it pulls for version.
func kubeadmImages(ctx context.Context, kube, version string) (map[string]string, error) {
	out, err := exec.CommandContext(ctx, kube, "kubeadm", "config", "images", "list",
		"--kubernetes-version", version, "-o", "json").Output()
	if err != nil {
		var stderr string
		if exitErr, ok := err.(*exec.ExitError); ok {
			stderr = string(exitErr.Stderr)
		}
		return nil, fmt.Errorf("components: kubeadm config images list: %w: %s", err, stderr)
	}
	var list struct{ Images []string }
	if err := json.Unmarshal(out, &list); err != nil {
		return nil, fmt.Errorf("components: kubeadm config images list printed %q: %w", out, err)
	}
	images := map[string]string{}
	for _, ref := range list.Images {
		repo := ref[:strings.LastIndex(ref, ":")]
		images[repo[strings.LastIndex(repo, "/")+1:]] = ref
	}
	for _, want := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "kube-proxy", "etcd", "coredns", "pause"} {
		if images[want] == "" {
			return nil, fmt.Errorf("components: kubeadm %s lists no %s image among %v", version, want, list.Images)
		}
	}
	return images, nil
}

// tagOf is the tag of an image reference ("3.10.1" of
// "registry.k8s.io/pause:3.10.1").
func tagOf(ref string) string { return ref[strings.LastIndex(ref, ":")+1:] }
