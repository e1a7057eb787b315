package e2e

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"capstan.dev/capstan/internal/testenv"
)

// env is a plane shared by the tests that only need an API server; the
// lifecycle tests start planes of their own through the CLI.
var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

// capstan runs the binary and returns its combined output and exit code.
func capstan(t testing.TB, args ...string) (string, int) {
	t.Helper()
	return capstanWithin(t, 5*time.Minute, args...)
}

// capstanWithin is capstan for a command that may take longer than five
// minutes, such as bringing up virtual machines.
func capstanWithin(t testing.TB, limit time.Duration, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, env.Binary, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return out.String(), 0
	case errors.As(err, &exit):
		return out.String(), exit.ExitCode()
	default:
		t.Fatalf("capstan %s: %v\n%s", strings.Join(args, " "), err, out.String())
		return "", -1
	}
}

// plane is a management plane a test starts and stops through the CLI.
type plane struct {
	t   testing.TB
	dir string
}

func newPlane(t testing.TB) *plane {
	p := &plane{t: t, dir: filepath.Join(t.TempDir(), "state")}
	t.Cleanup(func() {
		if running, _ := p.running(); running {
			capstan(t, "down", "--state-dir", p.dir)
		}
		killProcessesUnder(p.dir)
	})
	return p
}

// killProcessesUnder kills what a test left running from dir: local
// machines, QEMU VMs and load balancers outlive the management plane by
// design.
func killProcessesUnder(dir string) {
	for _, pid := range processesUnder(dir) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// processesUnder lists the processes (other than this one) whose command
// line names a path under dir.
func processesUnder(dir string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(cmdline, []byte(dir+"/")) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// up starts the plane, with extra flags of capstan up if given.
func (p *plane) up(flags ...string) string {
	p.t.Helper()
	out, code := capstan(p.t, append([]string{"up", "--state-dir", p.dir}, flags...)...)
	if code != 0 {
		p.t.Fatalf("capstan up exited %d:\n%s\nlog:\n%s", code, out, p.log())
	}
	return out
}

func (p *plane) down() {
	p.t.Helper()
	if out, code := capstan(p.t, "down", "--state-dir", p.dir); code != 0 {
		p.t.Fatalf("capstan down exited %d:\n%s", code, out)
	}
}

func (p *plane) log() string {
	b, _ := os.ReadFile(filepath.Join(p.dir, "capstan.log"))
	return string(b)
}

// pid is the process holding the state directory, read from its lock file.
func (p *plane) pid() int {
	b, err := os.ReadFile(filepath.Join(p.dir, "capstan.lock"))
	if err != nil {
		p.t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		p.t.Fatalf("lock file: %v", err)
	}
	return pid
}

func (p *plane) running() (bool, string) {
	out, code := capstan(p.t, "status", "--state-dir", p.dir)
	return code == 0, out
}

func (p *plane) client() client.Client {
	p.t.Helper()
	return kubeconfigClient(p.t, filepath.Join(p.dir, "kubeconfig"))
}

// kubeconfigClient is a client of the management cluster a kubeconfig
// file names.
func kubeconfigClient(t testing.TB, kubeconfig string) client.Client {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// kill ends the plane the hard way and waits until the process is gone.
func (p *plane) kill() {
	p.t.Helper()
	pid := p.pid()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		p.t.Fatal(err)
	}
	for i := 0; i < 100; i++ {
		if syscall.Kill(pid, 0) != nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	p.t.Fatalf("process %d survived SIGKILL", pid)
}
