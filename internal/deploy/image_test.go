package deploy_test

import (
	"testing"

	"capstan.dev/capstan/internal/deploy"
)

func TestIsCapstanImage(t *testing.T) {
	for image, want := range map[string]bool{
		"ghcr.io/capstan-dev/capstan":                      true,
		"ghcr.io/capstan-dev/capstan:dev":                  true,
		"ghcr.io/capstan-dev/capstan:v1.2.3":               true,
		"ghcr.io/capstan-dev/capstan@sha256:abcd":          true,
		"ghcr.io/capstan-dev/capstan:v1@sha256:abcd":       true,
		deploy.Image("v0.1.0"):                             true,
		"ghcr.io/capstan-dev/capstan-extra:dev":            false,
		"ghcr.io/capstan-dev/other:dev":                    false,
		"example.com:5000/ghcr.io/capstan-dev/capstan:dev": false,
		"registry.k8s.io/pause:3.10":                       false,
		"":                                                 false,
	} {
		if got := deploy.IsCapstanImage(image); got != want {
			t.Errorf("IsCapstanImage(%q) = %v, want %v", image, got, want)
		}
	}
}
