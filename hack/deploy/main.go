// Command deploy writes config/deploy/capstan.yaml, the manifests that
// install Capstan into any cluster with kubectl apply.
package main

import (
	"fmt"
	"os"

	"capstan.dev/capstan/internal/deploy"
)

func main() {
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
