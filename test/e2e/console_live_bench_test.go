package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/bench"
)

// liveFleetSize is how many live clusters BenchmarkConsoleLiveFleet brings
// up: $CAPSTAN_LIVE_FLEET, or a thousand.
func liveFleetSize(b *testing.B) int {
	v := os.Getenv("CAPSTAN_LIVE_FLEET")
	if v == "" {
		return 1000
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("CAPSTAN_LIVE_FLEET=%q: give the number of clusters, at least 1", v)
	}
	return n
}

// BenchmarkConsoleLiveFleet measures the console's fleet view over live
// clusters: `capstan bench scale --keep` brings up $CAPSTAN_LIVE_FLEET
// (default 1,000) in-memory clusters of one control-plane machine and one
// worker, with the real controllers and the provider's simulated machines
// and workload API servers (default delays: a machine boots in about 10s),
// and leaves them running; `capstan ui` serves their console to Chromium.
// It reports the time from navigation to every row built (the marks of
// BenchmarkConsoleFleet), and for changes made through the API the time
// from the write to the row showing it: pausing and resuming a Cluster
// (spec.paused, which the console shows from the Cluster alone: its own
// latency, 150 ms of batching included) and scaling a MachineDeployment
// from one worker to two (through the MachineDeployment and Cluster
// controllers to the row's desired count, then through the simulated
// machine's boot and Node to 2/2 ready). It also reports the console
// server's memory and, for context, the memory of the processes that run
// the fleet and the time to bring it up.
//
//	make build && CAPSTAN_BIN=$PWD/bin/capstan CAPSTAN_LIVE_FLEET=100 \
//	  go test ./test/e2e -run '^$' -bench ConsoleLiveFleet -benchtime 1x -timeout 90m
func BenchmarkConsoleLiveFleet(b *testing.B) {
	size := liveFleetSize(b)
	br := newBrowser(b)
	started := time.Now()
	fleet := startLiveFleet(b, size)
	upWall := time.Since(started)
	b.Logf("%d live clusters (%d Machines) Running %.0fs after the first create, %s after the benchmark started; namespace %s",
		size, fleet.res.Machines, fleet.res.To100, upWall.Round(time.Second), fleet.res.Namespace)
	c := kubeconfigClient(b, fleet.res.Kubeconfig)
	ns := fleet.res.Namespace

	uiStarted := time.Now()
	url, ui := startConsole(b, fleet.res.Kubeconfig)
	tab := br.open(b, url)
	countRows := fmt.Sprintf(`document.querySelectorAll('tr[data-cluster^="%s/"]').length === %d`, ns, size)
	tab.waitFor("the whole live fleet", 5*time.Minute, countRows, `document.querySelector('[data-testid=count]').textContent`)
	b.Logf("capstan ui showed the whole fleet %s after it started", time.Since(uiStarted).Round(time.Millisecond))

	var render, listed, pause, resume, desired, ready time.Duration
	runs := 0
	for i := 0; b.Loop(); i++ {
		runs++
		r, l := reloadFleet(tab, countRows)
		render, listed = render+r, listed+l

		// Pause and resume one cluster: the console's own latency.
		name := fmt.Sprintf("c%d", (i*37)%size)
		flag := fmt.Sprintf(`document.querySelector(%s)`, jsString(fmt.Sprintf(`tr[data-cluster="%s/%s"] .flag.paused`, ns, name)))
		rowText := fmt.Sprintf(`document.querySelector(%s).textContent`, jsString(fmt.Sprintf(`tr[data-cluster="%s/%s"]`, ns, name)))
		for _, paused := range []bool{true, false} {
			shows := "!!" + flag
			if !paused {
				shows = "!" + flag
			}
			watchFleet(tab, map[string]string{"paused": shows})
			before := time.Now()
			patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"paused":%t}}`, paused))
			if err := c.Patch(context.Background(), &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, patch); err != nil {
				b.Fatal(err)
			}
			delay := seenAfter(tab, fmt.Sprintf("%s paused=%t in its row", name, paused), "paused", 10*time.Second, before, rowText)
			if paused {
				pause += delay
			} else {
				resume += delay
			}
		}

		// Scale another cluster's workers from one to two: the controllers'
		// work and the simulated machine's boot, then the console's.
		name = fmt.Sprintf("c%d", (i*37+size/2)%size)
		workers := fmt.Sprintf(`document.querySelector(%s).textContent`, jsString(fmt.Sprintf(`tr[data-cluster="%s/%s"] [data-field=workers]`, ns, name)))
		watchFleet(tab, map[string]string{"desired": workers + `.endsWith('/2')`, "ready": workers + ` === '2/2'`})
		before := time.Now()
		scale := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":2}}`))
		if err := c.Patch(context.Background(), &clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-md"}}, scale); err != nil {
			b.Fatal(err)
		}
		ready += seenAfter(tab, name+"'s second worker ready in its row", "ready", 2*time.Minute, before, workers)
		desired += seenAfter(tab, name+"'s second worker desired in its row", "desired", time.Second, before, workers)
	}
	tab.shot(fmt.Sprintf("fleet-%d", size))

	uiRSS, uiPeak := memoryOf(b, ui.Process.Pid)
	fleetRSS, fleetPeak := memoryOf(b, fleet.cmd.Process.Pid)
	apiRSS, apiPeak := memoryOf(b, fleet.planePid(b))
	n := float64(runs)
	b.ReportMetric(render.Seconds()*1000/n, "render-ms")
	b.ReportMetric(listed.Seconds()*1000/n, "list-arrived-ms")
	b.ReportMetric(pause.Seconds()*1000/n, "pause-shown-ms")
	b.ReportMetric(resume.Seconds()*1000/n, "resume-shown-ms")
	b.ReportMetric(desired.Seconds()*1000/n, "scale-desired-shown-ms")
	b.ReportMetric(ready.Seconds()/n, "scale-ready-shown-s")
	b.ReportMetric(uiRSS, "server-rss-MiB")
	b.ReportMetric(uiPeak, "server-peak-rss-MiB")
	b.ReportMetric(fleetRSS, "controllers-rss-MiB")
	b.ReportMetric(fleetPeak, "controllers-peak-rss-MiB")
	b.ReportMetric(apiRSS, "apiserver-rss-MiB")
	b.ReportMetric(apiPeak, "apiserver-peak-rss-MiB")
	b.ReportMetric(fleet.res.To100, "up-s")
	b.ReportMetric(0, "ns/op")
	b.Logf("the controllers and simulated clusters (capstan bench scale): %.0f MiB, peak %.0f; the API server and etcd (capstan up): %.0f MiB, peak %.0f",
		fleetRSS, fleetPeak, apiRSS, apiPeak)
}

// liveFleet is a `capstan bench scale --keep` run holding its clusters.
type liveFleet struct {
	cmd *exec.Cmd
	res bench.Result
}

// startLiveFleet runs `capstan bench scale --keep` for size clusters of
// 1+1 machines until b ends, and returns once every Machine is Running,
// with the run's report.
func startLiveFleet(b *testing.B, size int) *liveFleet {
	b.Helper()
	logPath := filepath.Join(b.TempDir(), "bench-scale.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(env.Binary, "bench", "scale", "--clusters", strconv.Itoa(size), "--workers", "1", "--keep", "-o", "json", "--timeout", "90m")
	cmd.Stderr = logFile
	// Interrupted or terminated, it stops its controllers and its plane and
	// removes the plane's state: at the end of b, or if this process dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	f := &liveFleet{cmd: cmd}
	b.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(3 * time.Minute):
			b.Logf("capstan bench scale did not stop within 3 minutes of an interrupt; killing it")
			_ = cmd.Process.Kill()
			<-done
		}
		logFile.Close()
	})
	decoded := make(chan error, 1)
	go func() { decoded <- json.NewDecoder(stdout).Decode(&f.res) }()
	select {
	case err := <-decoded:
		if err != nil {
			log, _ := os.ReadFile(logPath)
			b.Fatalf("capstan bench scale gave no report (%v); its log ends:\n%s", err, tail(string(log), 40))
		}
	case <-time.After(95 * time.Minute):
		b.Fatalf("capstan bench scale did not report within 95 minutes")
	}
	if f.res.Kubeconfig == "" {
		b.Fatal("capstan bench scale --keep reported no kubeconfig")
	}
	return f
}

// planePid is the process of the fleet's API server and etcd: the one
// child of `capstan bench scale`.
func (f *liveFleet) planePid(b *testing.B) int {
	b.Helper()
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", f.cmd.Process.Pid))
	for _, path := range tasks {
		children, _ := os.ReadFile(path)
		for _, field := range strings.Fields(string(children)) {
			if pid, err := strconv.Atoi(field); err == nil && syscall.Kill(pid, 0) == nil {
				return pid
			}
		}
	}
	b.Fatalf("capstan bench scale (pid %d) has no child process: where is its plane?", f.cmd.Process.Pid)
	return 0
}
