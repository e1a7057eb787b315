// Command fakenode stands in for the capstan binary in the local provider's
// tests: `node lb --dir D` runs the real load balancer; `node run --dir D`
// is a machine that boots instantly: it reads D/machine.json, takes
// D/node.lock and writes a Running status.json as the real agent does (the
// same package machinedir code), then sleeps until SIGTERM. The provider
// must not tell the difference.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/go-logr/logr"

	"capstan.dev/capstan/internal/providers/local/lb"
	"capstan.dev/capstan/internal/providers/local/machinedir"
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
	m, err := machinedir.ReadMachine(dir)
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(dir, machinedir.BootstrapDataFile)); err != nil {
		return err
	}
	lock, err := machinedir.LockMachine(dir)
	if err != nil {
		return err
	}
	defer lock.Release()
	status := machinedir.Status{
		PID: os.Getpid(), Phase: machinedir.PhaseRunning, Message: "fake machine up",
		Since: time.Now().UTC().Truncate(time.Second), NodeName: m.Hostname,
		Bootstrap: &machinedir.BootstrapStatus{Complete: true, Skipped: []string{"runcmd[0]: apt-get update: not supported on a local machine"}},
	}
	if err := machinedir.WriteStatus(dir, status); err != nil {
		return err
	}
	<-ctx.Done()
	fmt.Println("fakenode stop")
	return nil
}
