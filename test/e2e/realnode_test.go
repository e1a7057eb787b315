package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"

	"capstan.dev/capstan/internal/providers/qemu/components"
)

// Helpers of the tests whose workload clusters are real Kubernetes nodes
// (the QEMU provider's VMs): commands run in containers, the echo image's
// answers, the test's time budget.

const (
	// echoImage is the image preloaded on every QEMU node: an HTTP server
	// on :8080 that answers GET / with "host=<its hostname> client=<the
	// caller's IP>" and GET /healthz. Pods use it with imagePullPolicy
	// Never: the guests reach no registry.
	echoImage = components.EchoImage
	// echoBinary is the echo program's path in the image (its entrypoint,
	// image.NodeImages); with the arguments "get <url>" it is the client,
	// printing the answer's body and exiting 0 on a 2xx, so that a Pod can
	// call another from inside the cluster network without a shell or
	// curl in the image.
	echoBinary = "/echo"
)

// cleanupReserve is the time budget leaves before the test's deadline: a
// wait that overran go test's -timeout would end the binary with a panic,
// before the cleanups that stop the plane and kill the VMs.
const cleanupReserve = 2 * time.Minute

// budget is want, or what is left of the test's time when that is less.
func budget(t *testing.T, want time.Duration) time.Duration {
	t.Helper()
	deadline, ok := t.Deadline()
	if !ok {
		return want
	}
	left := time.Until(deadline) - cleanupReserve
	if left <= 0 {
		t.Fatalf("no time left before the test's deadline %s (%s kept for the cleanup)", deadline.Format(time.TimeOnly), cleanupReserve)
	}
	return min(want, left)
}

// podExec runs command in a container of a Pod the way kubectl exec does:
// over a WebSocket, or SPDY when the server or a proxy on the way refuses
// the WebSocket upgrade.
func podExec(ctx context.Context, cfg *rest.Config, cs kubernetes.Interface, pod *corev1.Pod, container string, command ...string) (stdout, stderr string, err error) {
	req := cs.CoreV1().RESTClient().Post().Namespace(pod.Namespace).Resource("pods").Name(pod.Name).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: container, Command: command, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	ws, err := remotecommand.NewWebSocketExecutor(cfg, "GET", req.URL().String())
	if err != nil {
		return "", "", err
	}
	spdy, err := remotecommand.NewSPDYExecutor(cfg, "POST", req.URL())
	if err != nil {
		return "", "", err
	}
	exec, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return "", "", err
	}
	var out, errOut bytes.Buffer
	err = exec.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &out, Stderr: &errOut})
	return out.String(), errOut.String(), err
}

// execUntil runs command in the Pod's container until check accepts its
// output ("" is accepted, anything else is why not), for up to timeout,
// and returns that output. An exec can fail or, under load, come back
// empty without an error, and what the command reaches (a Service's
// endpoints, CoreDNS) can lag: each failed attempt is logged, the last one
// fails the test.
func execUntil(t *testing.T, cfg *rest.Config, cs kubernetes.Interface, pod *corev1.Pod, container string, timeout time.Duration, check func(stdout string) string, command ...string) string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
		stdout, stderr, err := podExec(ctx, cfg, cs, pod, container, command...)
		cancel()
		why := ""
		if err != nil {
			why = "exec: " + err.Error()
		} else {
			why = check(stdout)
		}
		if why == "" {
			if attempt > 1 {
				t.Logf("%s in %s: answered on attempt %d", strings.Join(command, " "), pod.Name, attempt)
			}
			return stdout
		}
		t.Logf("%s in %s: attempt %d: %s (stdout %q, stderr %q)", strings.Join(command, " "), pod.Name, attempt, why, stdout, stderr)
		if !time.Now().Before(deadline) {
			t.Fatalf("%s in %s: no good answer within %s (%d attempts): %s", strings.Join(command, " "), pod.Name, timeout, attempt, why)
		}
		time.Sleep(min(3*time.Second, time.Until(deadline)))
	}
}

// echoAnswer reads the echo server's one line "host=<name> client=<IP>".
func echoAnswer(out string) (host, client string, err error) {
	line := strings.TrimSpace(out)
	if strings.Contains(line, "\n") {
		return "", "", fmt.Errorf("more than one line: %q", out)
	}
	for _, f := range strings.Fields(line) {
		k, v, _ := strings.Cut(f, "=")
		switch k {
		case "host":
			host = v
		case "client":
			client = v
		}
	}
	if host == "" || client == "" {
		return "", "", fmt.Errorf("not host=<name> client=<IP>: %q", out)
	}
	return host, client, nil
}

// onContainerd is why a Pod does not run all its containers under
// containerd: "" when it does.
func onContainerd(p *corev1.Pod) string {
	if p.Status.Phase != corev1.PodRunning {
		return fmt.Sprintf("%s is %s %s", p.Name, p.Status.Phase, waitingReasons(p))
	}
	if len(p.Status.ContainerStatuses) == 0 {
		return p.Name + " reports no container"
	}
	for _, c := range p.Status.ContainerStatuses {
		if c.State.Running == nil {
			return fmt.Sprintf("%s: container %s not running %s", p.Name, c.Name, waitingReasons(p))
		}
		if !strings.HasPrefix(c.ContainerID, "containerd://") {
			return fmt.Sprintf("%s: container %s has ID %q, not one of containerd", p.Name, c.Name, c.ContainerID)
		}
	}
	return ""
}

// waitingReasons tells why a Pod's containers are not running (an image
// that is not there, a crash loop), for the failure messages.
func waitingReasons(p *corev1.Pod) string {
	var why []string
	for _, c := range append(append([]corev1.ContainerStatus(nil), p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		switch {
		case c.State.Waiting != nil:
			why = append(why, fmt.Sprintf("%s waiting: %s %s", c.Name, c.State.Waiting.Reason, c.State.Waiting.Message))
		case c.State.Terminated != nil:
			why = append(why, fmt.Sprintf("%s terminated: %s (exit %d)", c.Name, c.State.Terminated.Reason, c.State.Terminated.ExitCode))
		}
	}
	for _, c := range p.Status.Conditions {
		if c.Status != corev1.ConditionTrue && c.Message != "" {
			why = append(why, fmt.Sprintf("%s: %s", c.Type, c.Message))
		}
	}
	return "[" + strings.Join(why, "; ") + "]"
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// internalIPs are the InternalIP addresses a Node lists.
func internalIPs(n *corev1.Node) []string {
	var ips []string
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			ips = append(ips, a.Address)
		}
	}
	return ips
}

// qemuNetDir is where the QEMU provider keeps the unix sockets of its
// clusters' networks, one sub-directory per cluster, for this user.
func qemuNetDir() string {
	return filepath.Join(os.TempDir(), fmt.Sprintf("capstan-net-%d", os.Getuid()))
}

// netEntriesNamed are the entries of netDir that the command line of
// process pid names (the sockets QEMU's second NIC sends and receives on
// are under its cluster's sub-directory).
func netEntriesNamed(pid int, netDir string) ([]string, error) {
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return nil, err
	}
	return netEntriesIn(cmdline, netDir), nil
}

// netEntriesIn are the first path elements after netDir of the paths under
// it that a command line (its arguments NUL-terminated, as /proc shows
// them) names, each once.
func netEntriesIn(cmdline []byte, netDir string) []string {
	var names []string
	prefix := []byte(netDir + "/")
	for rest := cmdline; ; {
		i := bytes.Index(rest, prefix)
		if i < 0 {
			return names
		}
		rest = rest[i+len(prefix):]
		// A path in QEMU's options ends at a comma or at the argument's end.
		end := bytes.IndexAny(rest, "/,\x00")
		if end < 0 {
			end = len(rest)
		}
		if name := string(rest[:end]); name != "" && !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
}

// inPrefix tells whether addr is an address inside the CIDR block.
func inPrefix(block, addr string) bool {
	p, err := netip.ParsePrefix(block)
	if err != nil {
		return false
	}
	a, err := netip.ParseAddr(addr)
	return err == nil && p.Contains(a)
}

// etcdVersion finds the version `etcd --version` prints.
var etcdVersion = regexp.MustCompile(`etcd Version: (\d+\.\d+\.\d+)`)

var semver = regexp.MustCompile(`^v?\d+\.\d+\.\d+$`)

// imageVersion is the version an image's tag starts with, as in
// registry.k8s.io/etcd:3.6.5-0, or "" when the tag does not start with one.
func imageVersion(image string) string {
	i := strings.LastIndex(image, ":")
	if i < 0 || strings.Contains(image[i:], "/") {
		return ""
	}
	v, _, _ := strings.Cut(image[i+1:], "-")
	if semver.MatchString(v) {
		return strings.TrimPrefix(v, "v")
	}
	return ""
}

// elapsed logs how long a step took, at the end of the (sub)test.
func elapsed(t *testing.T, what string) {
	started := time.Now()
	t.Cleanup(func() { t.Logf("%s took %.0fs", what, time.Since(started).Seconds()) })
}

// TestRealNodeHelpers checks the readings the QEMU cluster test relies
// on, without a cluster: a wrong one would fail that test for nothing, or
// let it pass.
func TestRealNodeHelpers(t *testing.T) {
	for _, c := range []struct{ out, host, client string }{
		{"host=echo-7d9f-abcde client=10.244.1.5\n", "echo-7d9f-abcde", "10.244.1.5"},
		{"client=10.244.0.7 host=echo-x", "echo-x", "10.244.0.7"},
		{"", "", ""},
		{"host=echo-x\n", "", ""},
		{"host=a client=1.2.3.4\nhost=b client=1.2.3.5\n", "", ""},
	} {
		host, client, err := echoAnswer(c.out)
		if host != c.host || client != c.client || (err == nil) != (c.host != "") {
			t.Errorf("echoAnswer(%q) = %q, %q, %v; want %q, %q", c.out, host, client, err, c.host, c.client)
		}
	}
	for image, want := range map[string]string{
		"registry.k8s.io/etcd:3.6.5-0":           "3.6.5",
		"registry.k8s.io/kube-apiserver:v1.35.8": "1.35.8",
		"localhost:5000/etcd":                    "",
		"registry.k8s.io/etcd:latest":            "",
		"etcd":                                   "",
	} {
		if got := imageVersion(image); got != want {
			t.Errorf("imageVersion(%q) = %q, want %q", image, got, want)
		}
	}
	cmdline := []byte("qemu-system-x86_64\x00-netdev\x00dgram,id=net1,local.type=unix,local.path=/tmp/capstan-net-7/vms-1/m0.sock,remote.type=unix,remote.path=/tmp/capstan-net-7/vms-1/switch.sock\x00" +
		"-serial\x00file:/tmp/capstan-net-7/loose\x00-drive\x00file=/tmp/capstan-net-70/other/disk\x00" +
		"-chardev\x00socket,path=/tmp/capstan-net-7/flat.sock,id=c\x00")
	if got, want := netEntriesIn(cmdline, "/tmp/capstan-net-7"), []string{"vms-1", "loose", "flat.sock"}; !slices.Equal(got, want) {
		t.Errorf("netEntriesIn = %q, want %q", got, want)
	}
	if got := netEntriesIn([]byte("sleep\x0060\x00"), "/tmp/capstan-net-7"); len(got) != 0 {
		t.Errorf("netEntriesIn of a command naming no socket = %q", got)
	}
	for _, c := range []struct {
		block, addr string
		in          bool
	}{
		{"172.31.0.0/24", "172.31.0.2", true},
		{"172.31.0.0/24", "172.31.1.2", false},
		{"10.244.1.0/24", "10.244.1.9", true},
		{"", "10.244.1.9", false},
		{"10.244.1.0/24", "", false},
	} {
		if got := inPrefix(c.block, c.addr); got != c.in {
			t.Errorf("inPrefix(%q, %q) = %v", c.block, c.addr, got)
		}
	}
}
