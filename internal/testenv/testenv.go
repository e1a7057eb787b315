// Package testenv gives integration tests a real management plane: the
// capstan binary's embedded etcd and kube-apiserver, started once per test
// package as a subprocess on free loopback ports, with Capstan's CRDs
// installed and the namespace and garbage-collector controllers running.
// Tests share it and isolate themselves by namespace.
//
// A test package starts it from TestMain:
//
//	var env *testenv.Env
//
//	func TestMain(m *testing.M) { testenv.Main(m, &env) }
//
// The binary is $CAPSTAN_BIN when set (make test sets it), otherwise it is
// built from the module once per test binary.
package testenv

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"capstan.dev/capstan/internal/scheme"
)

// Env is a running management plane.
type Env struct {
	// Config reaches the API server as a cluster administrator.
	Config *rest.Config
	// Client is a controller-runtime client (no cache) over Config.
	Client client.Client
	// Scheme knows every kind Capstan uses.
	Scheme *runtime.Scheme
	// StateDir is the plane's state directory, removed by Stop.
	StateDir string
	// Binary is the capstan binary the plane runs from.
	Binary string

	cmd          *exec.Cmd
	removeBinary func()
}

// Main starts a plane, stores it in *env, runs the package's tests and stops
// the plane; it exits the process with the tests' code.
func Main(m *testing.M, env **Env) {
	if Fuzzing() {
		os.Exit(m.Run())
	}
	// Clients log the API server's warnings through controller-runtime's
	// logger; without one set, the first warning prints a stack trace.
	ctrllog.SetLogger(logr.Discard())
	e, err := Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "testenv:", err)
		os.Exit(1)
	}
	*env = e
	code := m.Run()
	e.Stop()
	os.Exit(code)
}

// Fuzzing tells whether the test binary runs a fuzz target (go test -fuzz
// FuzzX), in its coordinator or one of its workers. Such a run starts no
// plane: the fuzz targets need none, and every worker process would start
// its own. Main leaves *env nil then; a TestMain of its own asks Fuzzing.
func Fuzzing() bool {
	if !flag.Parsed() {
		flag.Parse()
	}
	f := flag.Lookup("test.fuzz")
	return f != nil && f.Value.String() != ""
}

// Start starts a plane on a fresh state directory.
func Start() (*Env, error) {
	bin, removeBinary, err := Binary()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "capstan-testenv-")
	if err != nil {
		removeBinary()
		return nil, err
	}
	e := &Env{StateDir: dir, Binary: bin, Scheme: scheme.New(), removeBinary: removeBinary}
	if err := e.start(); err != nil {
		e.Stop()
		return nil, err
	}
	return e, nil
}

func (e *Env) start() error {
	logFile, err := os.Create(filepath.Join(e.StateDir, "testenv.log"))
	if err != nil {
		return err
	}
	defer logFile.Close()
	readEnd, writeEnd, err := os.Pipe()
	if err != nil {
		return err
	}
	defer readEnd.Close()
	// Tests run the controllers they test themselves, and the web console
	// of the plane is not needed by any (internal/console starts its own).
	e.cmd = exec.Command(e.Binary, "up", "--foreground", "--controllers=false", "--ui-port=0", "--state-dir", e.StateDir, "--notify-fd", "3")
	e.cmd.Stdout, e.cmd.Stderr = logFile, logFile
	e.cmd.ExtraFiles = []*os.File{writeEnd}
	// The plane must not outlive a test binary that panics or is killed.
	e.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := e.cmd.Start(); err != nil {
		writeEnd.Close()
		return fmt.Errorf("starting %s: %w", e.Binary, err)
	}
	writeEnd.Close()
	line, _ := bufio.NewReader(readEnd).ReadString('\n')
	if strings.TrimSpace(line) != "ready" {
		_ = e.cmd.Wait()
		e.cmd = nil
		log, _ := os.ReadFile(logFile.Name())
		return fmt.Errorf("management plane did not start (%s); its log:\n%s", strings.TrimSpace(line), tail(string(log), 40))
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(e.StateDir, "kubeconfig"))
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 200, 400
	e.Config = cfg
	e.Client, err = client.New(cfg, client.Options{Scheme: e.Scheme})
	return err
}

// Stop stops the plane and removes its state.
func (e *Env) Stop() {
	if e.cmd != nil && e.cmd.Process != nil {
		_ = e.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = e.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = e.cmd.Process.Kill()
			<-done
		}
		e.cmd = nil
	}
	if e.StateDir != "" {
		_ = os.RemoveAll(e.StateDir)
	}
	if e.removeBinary != nil {
		e.removeBinary()
	}
}

var nonName = regexp.MustCompile(`[^a-z0-9-]+`)

// Namespace creates a namespace of the test's own and deletes it (with all
// it holds) when the test ends.
func (e *Env) Namespace(t testing.TB) string {
	t.Helper()
	base := strings.Trim(nonName.ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	if len(base) > 40 {
		base = strings.TrimRight(base[:40], "-")
	}
	suffix := make([]byte, 3)
	_, _ = rand.Read(suffix)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: base + "-" + hex.EncodeToString(suffix)}}
	ctx := context.Background()
	if err := e.Client.Create(ctx, ns); err != nil {
		t.Fatalf("creating test namespace: %v", err)
	}
	t.Cleanup(func() {
		if err := e.Client.Delete(context.Background(), ns); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting test namespace %s: %v", ns.Name, err)
		}
	})
	return ns.Name
}

// Binary returns the capstan binary to run, $CAPSTAN_BIN or one built from
// this module into a temporary directory, and the function that removes what
// it built once nothing runs it any more (each build is 160 MB).
func Binary() (bin string, remove func(), err error) {
	if bin := os.Getenv("CAPSTAN_BIN"); bin != "" {
		if _, err := os.Stat(bin); err != nil {
			return "", nil, fmt.Errorf("CAPSTAN_BIN=%s: %w", bin, err)
		}
		return bin, func() {}, nil
	}
	root, err := ModuleRoot()
	if err != nil {
		return "", nil, err
	}
	// A directory per process: test binaries run in parallel, and one must
	// not overwrite a binary another is executing.
	out, err := os.MkdirTemp("", "capstan-testenv-bin-")
	if err != nil {
		return "", nil, err
	}
	remove = func() { _ = os.RemoveAll(out) }
	bin = filepath.Join(out, "capstan")
	build := exec.Command("go", "build", "-o", bin, "./cmd/capstan")
	build.Dir = root
	if msg, err := build.CombinedOutput(); err != nil {
		remove()
		return "", nil, fmt.Errorf("building capstan (set CAPSTAN_BIN to skip): %v\n%s", err, msg)
	}
	return bin, remove, nil
}

// ModuleRoot is the directory of Capstan's go.mod.
func ModuleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("not inside the capstan module")
	}
	return filepath.Dir(mod), nil
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
