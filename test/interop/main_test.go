package interop

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// Binaries under test and the upstream release they come from.
var (
	capstanBin    string
	clusterctlBin string
	providerBin   string // upstream's docker provider, with its in-memory backend
	upstream      string // the sigs.k8s.io/cluster-api version go.mod pins
)

// scheme reads Capstan's objects with upstream's Go types: a field Capstan
// spells differently fails to decode or comes back empty.
var scheme = kruntime.NewScheme()

func init() {
	for _, add := range []func(*kruntime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme,
		clusterv1.AddToScheme, bootstrapv1.AddToScheme, controlplanev1.AddToScheme} {
		if err := add(scheme); err != nil {
			panic(err)
		}
	}
}

func TestMain(m *testing.M) {
	if err := setUp(); err != nil {
		fmt.Fprintln(os.Stderr, "interop:", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

func setUp() error {
	capstanBin = os.Getenv("CAPSTAN_BIN")
	if capstanBin == "" {
		return errors.New("CAPSTAN_BIN is not set: build Capstan first (make build) and point CAPSTAN_BIN at bin/capstan, or run make test")
	}
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Version}}", "sigs.k8s.io/cluster-api").Output()
	if err != nil {
		return fmt.Errorf("reading the upstream version from go.mod: %w", err)
	}
	upstream = strings.TrimSpace(string(out))
	dir, err := binDir()
	if err != nil {
		return err
	}
	if clusterctlBin, err = build(dir, "clusterctl", "sigs.k8s.io/cluster-api/cmd/clusterctl"); err != nil {
		return err
	}
	if providerBin, err = build(dir, "capd-manager", "sigs.k8s.io/cluster-api/test/infrastructure/docker"); err != nil {
		return err
	}
	return nil
}

// binDir is where the upstream binaries are kept between runs: one build per
// upstream version and Go release, so a run after the first only checks that
// they exist.
func binDir() (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(base, "capstan-interop", upstream+"-"+runtime.Version())
	return dir, os.MkdirAll(dir, 0o755)
}

func build(dir, name, pkg string) (string, error) {
	bin := filepath.Join(dir, name)
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	start := time.Now()
	tmp := bin + ".tmp"
	cmd := exec.Command("go", "build", "-o", tmp, "-ldflags", "-X sigs.k8s.io/cluster-api/version.gitVersion="+upstream, pkg)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building %s %s: %w\n%s", pkg, upstream, err, out)
	}
	fmt.Fprintf(os.Stderr, "interop: built %s %s in %s\n", name, upstream, time.Since(start).Round(time.Second))
	return bin, os.Rename(tmp, bin)
}

// run runs a command and returns its combined output and exit code; it
// fails the test only when the command cannot be run at all.
func run(t testing.TB, env []string, bin string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), env...)
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
		t.Fatalf("%s %s: %v\n%s", filepath.Base(bin), strings.Join(args, " "), err, out.String())
		return "", -1
	}
}

func capstan(t testing.TB, args ...string) (string, int) {
	t.Helper()
	return run(t, nil, capstanBin, args...)
}

// clusterctl runs upstream clusterctl with a configuration directory of the
// test's own and no look-up of newer releases (there is no network here).
func clusterctl(t testing.TB, args ...string) (string, int) {
	t.Helper()
	return run(t, []string{"XDG_CONFIG_HOME=" + configHome(t), "CLUSTERCTL_DISABLE_VERSIONCHECK=true"}, clusterctlBin, args...)
}

var configHomes = map[testing.TB]string{}

func configHome(t testing.TB) string {
	if d, ok := configHomes[t]; ok {
		return d
	}
	d := t.TempDir()
	configHomes[t] = d
	return d
}

// mustClusterctl runs clusterctl and fails the test when it exits non-zero.
func mustClusterctl(t testing.TB, args ...string) string {
	t.Helper()
	out, code := clusterctl(t, args...)
	if code != 0 {
		t.Fatalf("clusterctl %s exited %d:\n%s", strings.Join(args, " "), code, out)
	}
	return out
}

// plane is a Capstan management plane started with capstan up.
type plane struct {
	t   testing.TB
	dir string
}

func newPlane(t testing.TB) *plane {
	p := &plane{t: t, dir: filepath.Join(t.TempDir(), "state")}
	t.Cleanup(func() {
		if _, code := capstan(t, "status", "--state-dir", p.dir); code == 0 {
			capstan(t, "down", "--state-dir", p.dir)
		}
		killProcessesUnder(p.dir)
	})
	return p
}

// up runs capstan up on the plane's state directory with args.
func (p *plane) up(args ...string) string {
	p.t.Helper()
	out, code := capstan(p.t, append([]string{"up", "--state-dir", p.dir}, args...)...)
	if code != 0 {
		p.t.Fatalf("capstan up %s exited %d:\n%s\nlog:\n%s", strings.Join(args, " "), code, out, tail(p.log(), 60))
	}
	return out
}

func (p *plane) kubeconfig() string { return filepath.Join(p.dir, "kubeconfig") }

func (p *plane) log() string {
	b, _ := os.ReadFile(filepath.Join(p.dir, "capstan.log"))
	return string(b)
}

func (p *plane) restConfig() *rest.Config {
	p.t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", p.kubeconfig())
	if err != nil {
		p.t.Fatal(err)
	}
	return cfg
}

func (p *plane) client() client.Client {
	p.t.Helper()
	c, err := client.New(p.restConfig(), client.Options{Scheme: scheme})
	if err != nil {
		p.t.Fatal(err)
	}
	return c
}

// killProcessesUnder kills what a test left running from dir: local machines
// and load balancers outlive the management plane by design.
func killProcessesUnder(dir string) {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(cmdline, []byte(dir+"/")) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// eventually polls check until it returns "" or timeout passes; the last
// answer says what was still missing.
func eventually(t testing.TB, what string, timeout time.Duration, check func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for time.Now().Before(deadline) {
		if last = check(); last == "" {
			return
		}
		time.Sleep(time.Second)
	}
	t.Fatalf("%s: not after %s: %s", what, timeout, last)
}

// gvk names a kind for unstructured reads.
func gvk(group, version, kind string) schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: group, Version: version, Kind: kind}
}
