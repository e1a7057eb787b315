// Package version tells which Capstan build is running.
package version

import "k8s.io/component-base/version"

// Version is Capstan's version, set at build time with
// -ldflags "-X capstan.dev/capstan/internal/version.Version=...".
var Version = "dev"

// Kubernetes is the version of the embedded Kubernetes components.
func Kubernetes() string { return version.Get().GitVersion }
