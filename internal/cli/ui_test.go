package cli

import (
	"bytes"
	"context"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"

	"capstan.dev/capstan/internal/mgmt"
)

// A plane whose console port is taken says so and goes on; `up` and
// `status` print why there is no console.
func TestPlaneConsoleOnABusyPort(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	port := taken.Addr().(*net.TCPAddr).Port
	dir := mgmt.StateDir(t.TempDir())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	remove := startPlaneConsole(ctx, dir, env.Config, port)

	var out bytes.Buffer
	printPlaneConsole(&out, dir, os.Getpid())
	if want := "port " + strconv.Itoa(port); !strings.Contains(out.String(), "the web console is off: "+want) || !strings.Contains(out.String(), "--ui-port") {
		t.Errorf("a busy port prints %q, want the port and the --ui-port fix", out.String())
	}
	info, err := os.Stat(planeConsolePath(dir))
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("the console record: %v, mode %v; want 0600", err, info)
	}
	out.Reset()
	printPlaneConsole(&out, dir, os.Getpid()+1)
	if out.Len() != 0 {
		t.Errorf("the record of another run is printed: %q", out.String())
	}
	remove()
	if _, err := os.Stat(planeConsolePath(dir)); !os.IsNotExist(err) {
		t.Errorf("the record is left after the plane stops: %v", err)
	}
}
