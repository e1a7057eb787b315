package vm_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"capstan.dev/capstan/internal/procstat"
	"capstan.dev/capstan/internal/providers/qemu/image"
	"capstan.dev/capstan/internal/providers/qemu/vm"
	"capstan.dev/capstan/test/fixture"
)

// One VM, booted once (each boot costs about a minute of emulated CPU),
// proves the image and the runtime together: cloud-init runs the
// user-data, upstream's node programs of the embedded Kubernetes version
// run in the guest, the guest's loopback reaches the host's through
// LoopbackForwards, a host forward reaches a guest port; then QEMU is
// killed, which Exited and Inspect see, and Remove leaves nothing.
func TestVMLifecycle(t *testing.T) {
	fixture.RequireQEMU(t)
	ctx := context.Background()
	kube := embeddedKubernetes(t)
	o := image.NodeOptions{CacheDir: fixture.QEMUImageCache(t), KubernetesVersion: kube, Progress: func(s string) { t.Log(s) }}
	start := time.Now()
	img, err := image.EnsureNode(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	ensured := time.Since(start)
	start = time.Now()
	o.Progress = func(s string) { t.Errorf("a second EnsureNode built again: %s", s) }
	if again, err := image.EnsureNode(ctx, o); err != nil || again != img {
		t.Fatalf("second EnsureNode: %+v, %v; want %+v", again, err, img)
	}
	cached := time.Since(start)
	var sizes []string
	for _, f := range []string{img.Disk, img.Kernel, img.Initrd} {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, fmt.Sprintf("%s %d MiB", filepath.Base(f), fi.Size()>>20))
	}
	t.Logf("FIGURE image %s: first EnsureNode %s (a build when the cache was empty), cached EnsureNode %s; %s",
		img.ID, ensured.Round(time.Second), cached.Round(time.Millisecond), strings.Join(sizes, ", "))
	if cached > 30*time.Second {
		t.Errorf("a cached EnsureNode took %s", cached)
	}

	// The host's loopback listener the guest reports to, through its own
	// 127.0.0.1.
	reports := make(chan string, 1)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	reportPort := l.Addr().(*net.TCPAddr).Port
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		select {
		case reports <- string(b):
		default:
		}
	})}
	go srv.Serve(l)
	defer srv.Close()

	guestHTTP := fixture.FreePort(t)
	dir := filepath.Join(t.TempDir(), "vm")
	userData := fmt.Sprintf(`#cloud-config
write_files:
  - path: /srv/probe/hello
    content: "hello from the guest\n"
runcmd:
  - [systemd-run, --unit=probe-http, python3, -m, http.server, "8080", --directory, /srv/probe]
  - |
    {
      echo "user-data: ran"
      echo "kubeadm: $(kubeadm version -o short 2>&1)"
      echo "kubelet: $(kubelet --version 2>&1)"
      echo "containerd: $(systemctl is-active containerd 2>&1)"
    } > /run/probe-report
    curl -sS --retry 10 --retry-connrefused --retry-delay 2 --data-binary @/run/probe-report http://127.0.0.1:%d/report
`, reportPort)
	spec := vm.Spec{
		Dir: dir, Image: img, Hostname: "probe-0", InstanceID: "probe-0-" + strconv.FormatInt(time.Now().UnixNano(), 36),
		MetaData:   map[string]string{"provider-id": "qemu:///test/probe-0"},
		UserData:   []byte(userData),
		VendorData: vm.LoopbackForwards([]int{reportPort}),
		CPUs:       1, MemoryMiB: 1024,
		Forwards: []vm.Forward{{HostPort: guestHTTP, GuestPort: 8080}},
	}
	start = time.Now()
	if err := vm.Start(ctx, spec); err != nil {
		t.Fatal(err)
	}
	removed := false
	defer func() {
		if !removed {
			if err := vm.Remove(ctx, dir, 0); err != nil {
				t.Errorf("removing the VM: %v", err)
			}
		}
	}()
	started := time.Since(start)
	st, err := vm.Inspect(ctx, dir)
	if err != nil || !st.Running || st.PID == 0 {
		t.Fatalf("Inspect of a started VM: %+v, %v", st, err)
	}
	for _, f := range []string{"", "disk.qcow2", "seed.iso", "console.log", "qemu.log", "qmp.sock", "qemu.pid"} {
		fi, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		want := os.FileMode(0o600)
		if f == "" {
			want = 0o700
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s has mode %o, want %o", filepath.Join(dir, f), fi.Mode().Perm(), want)
		}
	}

	var report string
	select {
	case report = <-reports:
	case <-time.After(10 * time.Minute):
		t.Fatalf("no report from the guest within 10 minutes; its console ends with:\n%s", tail(filepath.Join(dir, "console.log"), 30))
	}
	booted := time.Since(start)
	t.Logf("guest report:\n%s", report)
	for _, want := range []string{
		"user-data: ran",   // (a) cloud-init ran the user-data
		"kubeadm: " + kube, // (b) upstream's node programs of this version
		"kubelet: Kubernetes " + kube,
		"containerd: active", // (c) the container runtime runs at boot
	} {
		if !strings.Contains(report, want) {
			t.Errorf("the report lacks %q", want)
		}
	}
	// (d) The report arrived: the guest's 127.0.0.1:reportPort is the host's.
	// (e) A host forward reaches the guest's port 8080.
	fixture.Eventually(t, "the guest's web server through the host forward", 2*time.Minute, func(ctx context.Context) string {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/hello", guestHTTP), nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return fixture.Unless(string(b) == "hello from the guest\n", fmt.Sprintf("%s: %q", resp.Status, b))
	})
	t.Logf("FIGURE boot: QEMU answered QMP after %s; the guest reported from runcmd (cloud-init's last stage) after %s; %s",
		started.Round(time.Millisecond), booted.Round(time.Second), usage(t, st.PID))

	// Starting a running VM changes nothing.
	if err := vm.Start(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if again, err := vm.Inspect(ctx, dir); err != nil || again.PID != st.PID || again.Status != "running" {
		t.Fatalf("after a second Start: %+v, %v; want the same process (%d) running", again, err, st.PID)
	}

	exited, err := vm.Exited(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(st.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(time.Minute):
		t.Fatal("QEMU was killed a minute ago and Exited has not fired")
	}
	// This process started QEMU: Exited fires once it has recorded why
	// QEMU ended, so Inspect says so at once.
	if st, err := vm.Inspect(ctx, dir); err != nil || st.Running || !strings.Contains(st.Exited, "signal 9") {
		t.Errorf("Inspect after QEMU was killed: %+v, %v; want not running, killed by signal 9", st, err)
	}

	if err := vm.Remove(ctx, dir, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	removed = true
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after Remove, %s: %v", dir, err)
	}
	if c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", guestHTTP)); err == nil {
		c.Close()
		t.Errorf("after Remove, port %d still listens", guestHTTP)
	}
	if err := syscall.Kill(st.PID, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("after Remove, process %d: %v", st.PID, err)
	}
}

func lineWith(s, prefix string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}

// usage is the QEMU process's resident memory and CPU time so far.
func usage(t *testing.T, pid int) string {
	u, err := procstat.Read(pid)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("QEMU RSS %.0f MiB, CPU %.0f s", u.RSSMiB, u.CPUSeconds)
}

func tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// embeddedKubernetes is the Kubernetes release Capstan embeds, the version
// its node images carry. A test binary has no module versions in its build
// information (package version's source), so the go command says.
func embeddedKubernetes(t *testing.T) string {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Version}}", "k8s.io/kubernetes").Output()
	if err != nil {
		t.Fatalf("go list -m k8s.io/kubernetes: %v", err)
	}
	return strings.TrimSpace(string(out))
}
