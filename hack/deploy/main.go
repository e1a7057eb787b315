// Command deploy writes config/deploy/capstan.yaml, the manifests that
// install Capstan into any cluster with kubectl apply. The manager's image
// carries the version this program was built with (make generate stamps
// MANIFEST_VERSION, the commit or release tag), never a moving tag.
package main

import (
	"fmt"
	"os"

	"capstan.dev/capstan/internal/deploy"
	"capstan.dev/capstan/internal/version"
)

func main() {
	if version.Version == "" || version.Version == "dev" || version.Version == "latest" {
		fmt.Fprintln(os.Stderr, "deploy: no version to tag the manager's image with: run make generate, or go run -ldflags '-X capstan.dev/capstan/internal/version.Version=vX.Y.Z' ./hack/deploy")
		os.Exit(1)
	}
	objs, err := deploy.Objects(deploy.Options{})
	if err == nil {
		var out []byte
		if out, err = deploy.YAML(objs); err == nil {
			err = os.WriteFile("config/deploy/capstan.yaml", out, 0o644)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "deploy:", err)
		os.Exit(1)
	}
}
