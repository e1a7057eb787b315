// Command capstan is Cluster API in one binary: the embedded management
// plane, the controllers and the command-line tools.
package main

import (
	"os"

	"capstan.dev/capstan/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:]))
}
