package e2e

import (
	"cmp"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/test/fixture"
)

// fleetSize is how many clusters the console must show at once.
const fleetSize = 1000

// BenchmarkConsoleFleet measures the fleet view of a thousand clusters in
// Chromium: the time from navigation to every row built (performance.now()
// in the page, at the mark the page sets once the list is on screen; of
// which list-arrived-ms passed before the list had arrived), the
// time from a Cluster's status changing to its row showing it, and the
// console server's memory. The Clusters are objects with their status
// written directly on the shared API server (no controllers run there):
// what the console reads is the same as from live clusters, without the
// cost of simulating a thousand of them.
//
//	make build && CAPSTAN_BIN=$PWD/bin/capstan go test ./test/e2e -run '^$' -bench ConsoleFleet -benchtime 3x
func BenchmarkConsoleFleet(b *testing.B) {
	br := newBrowser(b)
	ns := env.Namespace(b)
	created := time.Now()
	createFleet(b, ns, fleetSize)
	b.Logf("%d Clusters with status created in %s", fleetSize, time.Since(created).Round(time.Millisecond))

	url, ui := startConsole(b, filepath.Join(env.StateDir, "kubeconfig"))
	tab := br.open(b, url)
	countRows := fmt.Sprintf(`document.querySelectorAll('tr[data-cluster^="%s/"]').length === %d`, ns, fleetSize)
	// The console's cache fills first; the timed loads come after.
	tab.waitFor("the whole fleet", 2*time.Minute, countRows, `document.querySelector('[data-testid=count]').textContent`)

	// b.Loop runs this function once, so the fleet is created once.
	var render, listed, live time.Duration
	runs := 0
	for i := 0; b.Loop(); i++ {
		runs++
		r, l := reloadFleet(tab, countRows)
		render, listed = render+r, listed+l

		// One cluster loses a worker; the page notes when its row shows it.
		name := fmt.Sprintf("fleet-%04d", (i*37)%fleetSize)
		ready := int32(2 - i%2) // differs from the row's current count every time
		row := fmt.Sprintf(`tr[data-cluster="%s/%s"] [data-field=workers]`, ns, name)
		watchFleet(tab, map[string]string{"shown": fmt.Sprintf(`document.querySelector(%s).textContent === %s`, jsString(row), jsString(fmt.Sprintf("%d/3", ready)))})
		before := time.Now()
		patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"status":{"workers":{"readyReplicas":%d}}}`, ready))
		if err := env.Client.Status().Patch(context.Background(), &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, patch); err != nil {
			b.Fatal(err)
		}
		live += seenAfter(tab, "the changed row", "shown", 10*time.Second, before, fmt.Sprintf(`document.querySelector(%s).textContent`, jsString(row)))
	}
	tab.shot("fleet-1000")
	rss, peak := memoryOf(b, ui.Process.Pid)
	n := float64(runs)
	b.ReportMetric(render.Seconds()*1000/n, "render-ms")
	b.ReportMetric(listed.Seconds()*1000/n, "list-arrived-ms")
	b.ReportMetric(live.Seconds()*1000/n, "live-ms")
	b.ReportMetric(rss, "server-rss-MiB")
	b.ReportMetric(peak, "server-peak-rss-MiB")
	b.ReportMetric(0, "ns/op")
	// A figure, not a verdict: on a loaded machine it varies several-fold.
	if render/time.Duration(runs) > time.Second {
		b.Logf("the fleet of %d took %s to render, over the one-second goal", fleetSize, render/time.Duration(runs))
	}
}

// reloadFleet reloads the page on the fleet and waits until allRows holds
// and the page has set its mark; it returns the time from navigation to
// every row built, and of it the time until the list had arrived (page,
// modules, the server's answer), both as the page measured them.
func reloadFleet(tb *tab, allRows string) (render, listed time.Duration) {
	tb.t.Helper()
	tb.do("reloading the fleet", navigateHash("#/"), chromedp.Reload())
	tb.waitFor("the whole fleet after a reload", time.Minute, allRows+` && performance.getEntriesByName('capstan-fleet-rendered').length > 0`,
		`document.querySelector('[data-testid=count]').textContent`)
	render = pageMillis(tb, `performance.getEntriesByName('capstan-fleet-rendered')[0].startTime`)
	listed = pageMillis(tb, `performance.getEntriesByType('resource').find(e => e.name.endsWith('/api/clusters')).responseEnd`)
	return render, listed
}

// pageMillis evaluates an expression giving milliseconds in the page.
func pageMillis(tb *tab, expression string) time.Duration {
	tb.t.Helper()
	return time.Duration(eval[float64](tb, expression) * float64(time.Millisecond))
}

// watchFleet has the page note when each named expression first holds
// (window.capstanSeen[name] = Date.now()), looked at on every change to the
// fleet's rows. It replaces the previous watch, whose expressions could
// still hold and would note the wrong change.
func watchFleet(tb *tab, expressions map[string]string) {
	tb.t.Helper()
	var checks strings.Builder
	for name, expression := range expressions {
		fmt.Fprintf(&checks, "if (!window.capstanSeen[%s] && (%s)) window.capstanSeen[%s] = Date.now();\n", jsString(name), expression, jsString(name))
	}
	eval[bool](tb, fmt.Sprintf(`(() => {
		if (window.capstanWatch) window.capstanWatch.disconnect();
		window.capstanSeen = {};
		window.capstanWatch = new MutationObserver(() => { %s });
		window.capstanWatch.observe(document.querySelector('[data-testid=fleet] tbody'), {subtree: true, childList: true, characterData: true});
		return true;
	})()`, checks.String()))
}

// seenAfter waits until the page has noted name (watchFleet) and returns
// how long after before it did; the clock is this machine's in both.
func seenAfter(tb *tab, what, name string, timeout time.Duration, before time.Time, show string) time.Duration {
	tb.t.Helper()
	seen := fmt.Sprintf(`window.capstanSeen[%s]`, jsString(name))
	tb.waitFor(what, timeout, seen+` > 0`, show)
	return time.UnixMilli(int64(eval[float64](tb, seen))).Sub(before)
}

// createFleet creates n Clusters in ns with the status a healthy cluster
// reports (every tenth one with a worker missing and not Available), a few
// at a time.
func createFleet(b *testing.B, ns string, n int) {
	ctx := context.Background()
	names := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for range 8 {
		wg.Go(func() {
			for i := range names {
				if err := createFleetCluster(ctx, ns, i); err != nil {
					mu.Lock()
					firstErr = cmp.Or(firstErr, err)
					mu.Unlock()
				}
			}
		})
	}
	for i := range n {
		names <- i
	}
	close(names)
	wg.Wait()
	if firstErr != nil {
		b.Fatal(firstErr)
	}
}

func createFleetCluster(ctx context.Context, ns string, i int) error {
	c := fixture.NewCluster(ns, fmt.Sprintf("fleet-%04d", i))
	c.Labels = map[string]string{"env": []string{"dev", "staging", "prod"}[i%3]}
	// A managed Cluster's topology names its class and version; no
	// controller acts on it here.
	c.Spec.Topology.ClassRef.Name = "quick-start"
	c.Spec.Topology.Version = "v1.35.8"
	if err := env.Client.Create(ctx, c); err != nil {
		return err
	}
	available, workersReady := metav1.ConditionTrue, int32(3)
	if i%10 == 9 {
		available, workersReady = metav1.ConditionFalse, 2
	}
	now := metav1.Now()
	c.Status = clusterv1.ClusterStatus{
		Phase: string(clusterv1.ClusterPhaseProvisioned),
		Conditions: []metav1.Condition{{Type: clusterv1.AvailableCondition, Status: available, Reason: "Benchmark",
			Message: "written by BenchmarkConsoleFleet", LastTransitionTime: now}},
		ControlPlane: &clusterv1.ClusterControlPlaneStatus{DesiredReplicas: ptr.To[int32](3), ReadyReplicas: ptr.To[int32](3), UpToDateReplicas: ptr.To[int32](3)},
		Workers:      &clusterv1.WorkersStatus{DesiredReplicas: ptr.To[int32](3), ReadyReplicas: ptr.To(workersReady), UpToDateReplicas: ptr.To[int32](3)},
	}
	return env.Client.Status().Update(ctx, c)
}
