package version

import (
	"testing"

	kubeversion "k8s.io/component-base/version"
)

// A plain `go build` (no -ldflags) made the embedded Kubernetes report
// v0.0.0-master, which clusterctl refuses. Test binaries carry no dependency
// versions, so this sets one; test/e2e checks what a built binary reports.
func TestSetKubernetes(t *testing.T) {
	setKubernetes("v1.35.8")
	info := kubeversion.Get()
	if Kubernetes() != "v1.35.8" || info.GitVersion != "v1.35.8" || info.Major != "1" || info.Minor != "35" {
		t.Errorf("Kubernetes() %q, version.Get() %+v; want v1.35.8, major 1, minor 35", Kubernetes(), info)
	}
}

func TestMajorMinor(t *testing.T) {
	for in, want := range map[string]string{"v1.35.8": "1/35", "v1.36.0-rc.1": "1/36", "v1": "", "": ""} {
		major, minor, ok := majorMinor(in)
		got := ""
		if ok {
			got = major + "/" + minor
		}
		if got != want {
			t.Errorf("majorMinor(%q) = %q, want %q", in, got, want)
		}
	}
}
