// Package version tells which Capstan build is running, and makes the
// Kubernetes it embeds report its own release.
package version

import (
	"runtime/debug"
	"strings"
	_ "unsafe" // go:linkname, below

	"k8s.io/component-base/version"
)

// Version is Capstan's version, set at build time with
// -ldflags "-X capstan.dev/capstan/internal/version.Version=...".
var Version = "dev"

// Kubernetes is the version of the embedded Kubernetes components.
func Kubernetes() string { return version.Get().GitVersion }

// The embedded kube-apiserver reports the version that component-base holds
// in these variables. Kubernetes' own build sets them with -ldflags; a plain
// `go build` or `go install` of Capstan leaves "v0.0.0-master", which
// clients such as clusterctl refuse. The release of the k8s.io/kubernetes
// module compiled in is known from the binary's build information, so it is
// set from there whatever the build command was.
//
//go:linkname kubeGitVersion k8s.io/component-base/version.gitVersion
var kubeGitVersion string

//go:linkname kubeGitMajor k8s.io/component-base/version.gitMajor
var kubeGitMajor string

//go:linkname kubeGitMinor k8s.io/component-base/version.gitMinor
var kubeGitMinor string

func init() { setKubernetes(embeddedKubernetes()) }

// setKubernetes makes component-base report Kubernetes release v, unless v is
// not a release ("" when the build information is missing: a test binary).
func setKubernetes(v string) {
	major, minor, ok := majorMinor(v)
	if !ok {
		return
	}
	kubeGitVersion, kubeGitMajor, kubeGitMinor = v, major, minor
	// What clients read is a copy taken when component-base started; it
	// accepts v now that the base version is v.
	_ = version.SetDynamicVersion(v)
}

// embeddedKubernetes is the Kubernetes release this binary was built with,
// or "" when the build information does not say: the version of the
// k8s.io/kubernetes module, or else of k8s.io/component-base, whose v0.X.Y
// is published with Kubernetes v1.X.Y.
func embeddedKubernetes() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	found := ""
	for _, dep := range info.Deps {
		if dep.Replace != nil {
			dep = dep.Replace
		}
		switch dep.Path {
		case "k8s.io/kubernetes":
			return dep.Version
		case "k8s.io/component-base":
			if rest, ok := strings.CutPrefix(dep.Version, "v0."); ok {
				found = "v1." + rest
			}
		}
	}
	return found
}

// majorMinor splits "v1.35.8" into "1" and "35".
func majorMinor(v string) (major, minor string, ok bool) {
	parts := strings.SplitN(strings.TrimPrefix(v, "v"), ".", 3)
	if len(parts) < 3 || parts[0] == "" || parts[1] == "" {
		return "", "", false
	}
	return parts[0], parts[1], true
}
