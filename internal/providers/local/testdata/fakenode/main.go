// Command fakenode stands in for the capstan binary in the local provider's
// tests: `node lb --dir D` runs the real load balancer; `node run --dir D`
// is a machine that boots instantly: it takes D/node.lock, writes a
// Running status.json and sleeps until SIGTERM. The provider must not tell
// the difference.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/go-logr/logr"

	"capstan.dev/capstan/internal/providers/local/lb"
	"capstan.dev/capstan/internal/providers/local/lockfile"
)

func main() {
	if len(os.Args) != 5 || os.Args[1] != "node" || os.Args[3] != "--dir" {
		fmt.Fprintln(os.Stderr, "usage: fakenode node run|lb --dir DIR")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	var err error
	switch os.Args[2] {
	case "lb":
		err = lb.Run(ctx, os.Args[4], logr.Discard())
	case "run":
		err = run(ctx, os.Args[4])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[2])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakenode:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, dir string) error {
	fmt.Printf("fakenode start pid %d\n", os.Getpid())
	var cfg struct {
		Hostname string `json:"hostname"`
	}
	raw, err := os.ReadFile(filepath.Join(dir, "machine.json"))
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(dir, "bootstrap-data")); err != nil {
		return err
	}
	lock, err := lockfile.Acquire(filepath.Join(dir, "node.lock"))
	if err != nil {
		return err
	}
	defer lock.Release()
	status := map[string]any{
		"pid": os.Getpid(), "phase": "Running", "message": "fake machine up",
		"since": time.Now().UTC().Format(time.RFC3339), "nodeName": cfg.Hostname,
		"bootstrap": map[string]any{"complete": true, "skipped": []string{"runcmd[0]: apt-get update: not supported on a local machine"}},
	}
	body, _ := json.Marshal(status)
	tmp := filepath.Join(dir, ".status.json.tmp")
	if err := os.WriteFile(tmp, body, 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, "status.json")); err != nil {
		return err
	}
	<-ctx.Done()
	fmt.Println("fakenode stop")
	return nil
}
