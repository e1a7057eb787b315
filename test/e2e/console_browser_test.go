package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/conditions"
	"capstan.dev/capstan/test/fixture"
)

// The web console in a real browser, against a real plane: the fleet lists
// the clusters with their states and filters them, a cluster's view shows
// its tree, conditions and Nodes, a scale done outside the console shows
// within a second, the confirmed actions take effect (a rollout restart
// shows the old and new Machines side by side, the new one rising through
// its phases), and a user whom RBAC refuses sees the API server's message
// while nothing changes; a remediation shows the MachineHealthCheck's
// verdict on the unhealthy Machine and its replacement. One plane and one
// browser serve every step.
func TestConsoleInBrowser(t *testing.T) {
	t.Parallel()
	b := newBrowser(t) // first: without Chromium there is nothing to start
	started := time.Now()
	p := newPlane(t)
	if out, code := capstan(t, "up", "--state-dir", p.dir, "--ui-port", "0"); code != 0 {
		t.Fatalf("capstan up exited %d:\n%s\nlog:\n%s", code, out, p.log())
	}
	c := p.client()
	ctx := context.Background()
	kubeconfig := filepath.Join(p.dir, "kubeconfig")

	config := filepath.Join(t.TempDir(), "capstan.yaml")
	if err := os.WriteFile(config, []byte("MACHINE_BOOT_DELAY: 1s\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"web-a", "web-b"} {
		out, code := capstan(t, "generate", "cluster", name, "--infrastructure", "in-memory", "--worker-machine-count", "1", "--config", config)
		if code != 0 {
			t.Fatalf("generate cluster %s exited %d:\n%s", name, code, out)
		}
		if err := apply(c, out); err != nil {
			t.Fatal(err)
		}
	}
	// A Cluster whose infrastructure does not exist: a problem to show.
	missing := &unstructured.Unstructured{}
	missing.SetAPIVersion("infrastructure.cluster.x-k8s.io/v1beta2")
	missing.SetKind("InMemoryCluster")
	missing.SetName("web-broken-gone")
	fixture.Create(t, c, fixture.NewCluster("default", "web-broken", fixture.Infrastructure(missing)))

	url, _ := startConsole(t, kubeconfig)
	admin := b.open(t, url)
	t.Logf("plane, clusters and console ready after %s", time.Since(started).Round(time.Second))

	t.Run("fleet", func(t *testing.T) {
		admin.t = t
		admin.waitFor("the three clusters listed", 20*time.Second,
			`document.querySelectorAll('[data-testid=fleet] tr[data-cluster]').length === 3`,
			`[...document.querySelectorAll('tr[data-cluster]')].map(r => r.dataset.cluster).join(', ')`)
		// The page took the token out of its address once it signed in,
		// and the URL it came in cannot sign in again.
		if href := eval[string](admin, `location.href`); strings.Contains(href, "token") {
			t.Errorf("the address bar still holds the token: %s", redactToken(href))
		}
		again := fmt.Sprintf(`fetch('/api/login', {method: 'POST', headers: {'Content-Type': 'application/json'},
			body: JSON.stringify({token: %s})}).then(r => r.status)`, jsString(strings.SplitN(url, "#token=", 2)[1]))
		if status, err := chromedp.Run(admin.ctx, chromedp.Evaluate[float64](again, chromedp.EvalAwaitPromise)); err != nil || status != 401 {
			t.Errorf("signing in again with the used URL: %v %v, want 401", status, err)
		}
		for _, name := range []string{"web-a", "web-b"} {
			row := fmt.Sprintf(`tr[data-cluster="default/%s"]`, name)
			admin.waitFor(name+" Available with 1/1 control plane and workers", 4*time.Minute,
				fmt.Sprintf(`(r => r && r.querySelector('[data-field=available]').textContent === 'Available' &&
					r.querySelector('[data-field=controlPlane]').textContent === '1/1' &&
					r.querySelector('[data-field=workers]').textContent === '1/1')(document.querySelector(%s))`, jsString(row)),
				fmt.Sprintf(`document.querySelector(%s).textContent`, jsString(row)))
			if v := admin.text(row + ` [data-field=version]`); v == "" || !strings.HasPrefix(v, "v1.") {
				t.Errorf("%s's version cell shows %q, want the Kubernetes version", name, v)
			}
		}
		if got := admin.text(`tr[data-cluster="default/web-broken"] [data-field=available]`); got == "Available" {
			t.Errorf("web-broken, whose infrastructure does not exist, shows %q", got)
		}
		admin.waitFor("the stream connected", 10*time.Second, `document.querySelector('[data-testid=live]').textContent === 'connected'`,
			`document.querySelector('[data-testid=live]').textContent`)
		admin.shot("fleet")

		for filter, want := range map[string]string{
			"default/web-a": "1 of 3 clusters",
			"web":           "3 of 3 clusters",
			"is:problem":    "1 of 3 clusters",
			"ns:default":    "3 of 3 clusters",
			"ns:elsewhere":  "0 of 3 clusters",
			"label:nope=1":  "0 of 3 clusters",
			"web is:paused": "0 of 3 clusters",
		} {
			admin.do("filtering "+filter, fill(`[data-testid=filter]`, filter)...)
			if got := admin.text(`[data-testid=count]`); got != want {
				t.Errorf("filter %q: count %q, want %q", filter, got, want)
			}
		}
		admin.do("filtering is:problem", fill(`[data-testid=filter]`, "is:problem")...)
		visible := eval[[]string](admin, `[...document.querySelectorAll('tr[data-cluster]')].filter(r => !r.hidden).map(r => r.dataset.cluster)`)
		if len(visible) != 1 || visible[0] != "default/web-broken" {
			t.Errorf("is:problem shows %v, want only default/web-broken", visible)
		}
		// The tally's link filters the same way, and the filter is in the
		// address, to bookmark or share.
		admin.do("clearing the filter", fill(`[data-testid=filter]`, "")...)
		admin.click(`[data-testid=tally] [data-filter="is:problem"]`)
		if got, hash := admin.text(`[data-testid=count]`), eval[string](admin, `location.hash`); got != "1 of 3 clusters" || hash != "#/?q=is%3Aproblem" {
			t.Errorf("after the tally's problem link: count %q at %q, want 1 of 3 clusters at #/?q=is%%3Aproblem", got, hash)
		}
		admin.do("clearing the filter", fill(`[data-testid=filter]`, "")...)
	})

	t.Run("cluster view", func(t *testing.T) {
		admin.t = t
		admin.do("opening web-a", navigateHash("#/clusters/default/web-a"))
		for _, row := range []string{
			`[data-kind=Cluster][data-name=web-a]`,
			`[data-kind=InMemoryCluster][data-name=web-a]`,
			`[data-kind=KubeadmControlPlane][data-name=web-a-control-plane]`,
			`[data-kind=MachineDeployment][data-name=web-a-md-0]`,
		} {
			admin.waitFor("tree row "+row, 20*time.Second, fmt.Sprintf(`document.querySelector('[data-testid=tree] %s')`, row),
				`document.querySelector('[data-testid=tree]')?.innerText`)
		}
		admin.waitFor("web-a Available in its tree", 20*time.Second,
			`document.querySelector('[data-kind=Cluster][data-name=web-a] [data-condition=Available]')?.dataset.status === 'True'`,
			`document.querySelector('[data-testid=tree]')?.innerText`)

		// Every Node of the workload sits beside its Machine.
		machines := &clusterv1.MachineList{}
		if err := c.List(ctx, machines, client.InNamespace("default"), client.MatchingLabels{clusterv1.ClusterNameLabel: "web-a"}); err != nil {
			t.Fatal(err)
		}
		for _, m := range machines.Items {
			if m.Status.NodeRef.Name == "" {
				t.Errorf("Machine %s has no Node yet though the cluster is Available", m.Name)
				continue
			}
			admin.waitFor("Node "+m.Status.NodeRef.Name+" Ready beside its Machine", 20*time.Second,
				fmt.Sprintf(`(t => t?.includes(%s) && t.includes('Ready') && !t.includes('NotReady'))(document.querySelector('[data-testid=nodes] tr[data-node=%s]')?.textContent)`,
					jsString(m.Name), jsString(m.Status.NodeRef.Name)),
				`document.querySelector('[data-testid=nodes]')?.innerText`)
			// Each Machine row says where the Machine is in its life.
			admin.waitFor("Machine "+m.Name+" phase "+m.Status.Phase, 20*time.Second,
				fmt.Sprintf(`document.querySelector('[data-testid=tree] [data-kind=Machine][data-name=%s]')?.textContent.includes(%s)`, jsString(m.Name), jsString(m.Status.Phase)),
				`document.querySelector('[data-testid=tree]')?.innerText`)
		}
		admin.shot("cluster-web-a")

		// A condition's message, word for word as the API server has it.
		admin.do("opening web-broken", navigateHash("#/clusters/default/web-broken"))
		var message string
		fixture.Eventually(t, "web-broken's Available condition explains", time.Minute, func(ctx context.Context) string {
			cluster := &clusterv1.Cluster{}
			if err := c.Get(ctx, types.NamespacedName{Namespace: "default", Name: "web-broken"}, cluster); err != nil {
				return err.Error()
			}
			cond := conditions.Get(cluster, clusterv1.AvailableCondition)
			if cond == nil || cond.Message == "" {
				return "no message yet"
			}
			message = cond.Message
			return ""
		})
		admin.waitFor("web-broken's Available message", 20*time.Second,
			fmt.Sprintf(`document.querySelector('[data-kind=Cluster][data-name=web-broken] [data-condition=Available] [data-field=message]')?.textContent === %s`, jsString(message)),
			`document.querySelector('[data-testid=tree]')?.innerText`)
		admin.shot("cluster-web-broken")
	})

	md := types.NamespacedName{Namespace: "default", Name: "web-a-md-0"}
	mdRow := `[data-kind=MachineDeployment][data-name=web-a-md-0]`

	t.Run("live update within a second", func(t *testing.T) {
		admin.t = t
		admin.do("opening web-a", navigateHash("#/clusters/default/web-a"))
		admin.waitFor("web-a-md-0's replicas", 20*time.Second, fmt.Sprintf(`document.querySelector('%s .replicas')`, mdRow), "")
		// The page notes when the row first shows 2 desired; the clock is
		// this machine's in both.
		eval[bool](admin, fmt.Sprintf(`(() => {
			window.capstanSeen = 0;
			const shows = () => /\/2 ready/.test(document.querySelector('%s .replicas')?.textContent || '');
			new MutationObserver(() => { if (!window.capstanSeen && shows()) window.capstanSeen = Date.now(); })
				.observe(document.getElementById('cluster-view'), {subtree: true, childList: true, characterData: true});
			return true;
		})()`, mdRow))
		// The fleet rows are built once: an event updates its own row and
		// leaves the others be. A fold the user opened stays open.
		eval[bool](admin, `(window.capstanRowA = document.querySelector('tr[data-cluster="default/web-a"]'),
			window.capstanCellB = document.querySelector('tr[data-cluster="default/web-b"] [data-field=workers]'), true)`)
		admin.click(mdRow + ` > details.folded > summary`)
		before := time.Now()
		// What `kubectl scale machinedeployment web-a-md-0 --replicas 2` sends.
		scale := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":2}}`))
		if err := c.Patch(ctx, &clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: md.Namespace, Name: md.Name}}, scale); err != nil {
			t.Fatal(err)
		}
		admin.waitFor("the scale shown", 10*time.Second, `window.capstanSeen > 0`, fmt.Sprintf(`document.querySelector('%s').innerText`, mdRow))
		delay := time.UnixMilli(int64(eval[float64](admin, `window.capstanSeen`))).Sub(before)
		t.Logf("a scale made with the API showed in the browser after %s", delay)
		if delay > time.Second {
			t.Errorf("the scale showed after %s, want within a second", delay)
		}
		admin.waitFor("the fleet row follows", 2*time.Minute,
			`document.querySelector('tr[data-cluster="default/web-a"] [data-field=workers]').textContent === '2/2'`,
			`document.querySelector('tr[data-cluster="default/web-a"]').textContent`)
		if !eval[bool](admin, `document.querySelector('tr[data-cluster="default/web-a"]') === window.capstanRowA`) {
			t.Error("web-a's fleet row was replaced, not updated in place")
		}
		if !eval[bool](admin, `document.querySelector('tr[data-cluster="default/web-b"] [data-field=workers]') === window.capstanCellB`) {
			t.Error("web-b's fleet row was rebuilt though web-b did not change")
		}
		if !eval[bool](admin, fmt.Sprintf(`document.querySelector('%s > details.folded').open`, mdRow)) {
			t.Error("the conditions fold opened on web-a-md-0 closed when the view updated")
		}
	})

	t.Run("scale through the dialog", func(t *testing.T) {
		admin.t = t
		admin.click(`[data-action=scale][data-target="MachineDeployment/web-a-md-0"]`)
		admin.do("typing 1 replica", fill(`[data-testid=replicas]`, "1")...)
		admin.shot("scale-dialog")
		admin.click(`[data-testid=confirm-ok]`)
		fixture.Eventually(t, "web-a-md-0 scaled to 1 by the console", 30*time.Second, func(ctx context.Context) string {
			got := &clusterv1.MachineDeployment{}
			if err := c.Get(ctx, md, got); err != nil {
				return err.Error()
			}
			return fixture.Unless(got.Spec.Replicas != nil && *got.Spec.Replicas == 1, fmt.Sprintf("replicas %v", got.Spec.Replicas))
		})
		admin.waitFor("the tree shows 1 desired", 10*time.Second, fmt.Sprintf(`/\/1 ready/.test(document.querySelector('%s .replicas').textContent)`, mdRow), "")
		if shown := admin.text(`[data-testid=error]:not([hidden])`); shown != "" {
			t.Errorf("an error shows after a scale that worked: %s", shown)
		}
	})

	t.Run("kubeconfig download", func(t *testing.T) {
		admin.t = t
		dir := t.TempDir()
		if _, err := chromedp.CallBrowser(admin.ctx, cdpbrowser.SetDownloadBehavior, cdpbrowser.SetDownloadBehaviorParams{
			Behavior: cdpbrowser.SetDownloadBehaviorBehaviorAllow, DownloadPath: dir}); err != nil {
			t.Fatal(err)
		}
		admin.click(`[data-action=kubeconfig]`)
		admin.click(`[data-testid=confirm-ok]`)
		path := filepath.Join(dir, "web-a.kubeconfig")
		fixture.Eventually(t, "web-a.kubeconfig downloaded", 20*time.Second, func(context.Context) string {
			_, err := os.Stat(path)
			return fixture.Reason(err)
		})
		cfg, err := clientcmd.LoadFromFile(path)
		if err != nil || len(cfg.Clusters) == 0 || len(cfg.AuthInfos) == 0 {
			t.Fatalf("the downloaded kubeconfig: %v, %d clusters, %d users", err, len(cfg.Clusters), len(cfg.AuthInfos))
		}
		// The file went to disk, never onto the page.
		if eval[bool](admin, `/PRIVATE KEY|client-key-data|certificate-authority-data/.test(document.documentElement.outerHTML)`) {
			t.Error("the page shows the kubeconfig's credentials")
		}
	})

	t.Run("pause and resume", func(t *testing.T) {
		admin.t = t
		admin.do("opening web-b", navigateHash("#/clusters/default/web-b"))
		for _, step := range []struct {
			action string
			paused bool
		}{{"pause", true}, {"resume", false}} {
			admin.click(fmt.Sprintf(`[data-action=%s]`, step.action))
			admin.click(`[data-testid=confirm-ok]`)
			fixture.Eventually(t, fmt.Sprintf("web-b paused=%v", step.paused), 30*time.Second, func(ctx context.Context) string {
				got := &clusterv1.Cluster{}
				if err := c.Get(ctx, types.NamespacedName{Namespace: "default", Name: "web-b"}, got); err != nil {
					return err.Error()
				}
				paused := got.Spec.Paused != nil && *got.Spec.Paused
				return fixture.Unless(paused == step.paused, fmt.Sprintf("spec.paused %v", paused))
			})
			next := map[string]string{"pause": "resume", "resume": "pause"}[step.action]
			admin.waitFor("the "+next+" button", 10*time.Second, fmt.Sprintf(`document.querySelector('[data-action=%s]')`, next), "")
			if step.paused {
				admin.shot("paused")
			}
		}
	})

	t.Run("rollout restart", func(t *testing.T) {
		admin.t = t
		list := &clusterv1.MachineList{}
		if err := c.List(ctx, list, client.InNamespace("default"), client.MatchingLabels{clusterv1.MachineDeploymentNameLabel: "web-b-md-0"}); err != nil {
			t.Fatal(err)
		}
		var old []string
		for _, m := range list.Items {
			old = append(old, m.Name)
		}
		oldJSON, _ := json.Marshal(old)
		// The page records every worker Machine and phase its tree shows
		// during the rollout, and whether old and new ever show together.
		eval[bool](admin, fmt.Sprintf(`(() => {
			const old = new Set(%s);
			window.capstanRollout = {seen: new Set(), both: false};
			const look = () => {
				const names = [];
				for (const row of document.querySelectorAll('[data-testid=tree] [data-kind=Machine]')) {
					const phase = row.querySelector(':scope > .tree-head .phase')?.textContent || '';
					for (const name of (row.dataset.name || row.dataset.machines || '').split(' ')) {
						if (!name.startsWith('web-b-md-0-')) continue;
						names.push(name);
						window.capstanRollout.seen.add(name + ' ' + phase);
					}
				}
				if (names.some(n => old.has(n)) && names.some(n => !old.has(n))) window.capstanRollout.both = true;
			};
			look();
			new MutationObserver(look).observe(document.getElementById('cluster-view'), {subtree: true, childList: true, characterData: true});
			return true;
		})()`, oldJSON))
		clicked := time.Now().Add(-time.Second) // rollout.after has a resolution of seconds
		admin.click(`[data-action=rollout-restart][data-target="MachineDeployment/web-b-md-0"]`)
		admin.click(`[data-testid=confirm-ok]`)
		fixture.Eventually(t, "web-b-md-0 asked to roll out", 30*time.Second, func(ctx context.Context) string {
			got := &clusterv1.MachineDeployment{}
			if err := c.Get(ctx, types.NamespacedName{Namespace: "default", Name: "web-b-md-0"}, got); err != nil {
				return err.Error()
			}
			after := got.Spec.Rollout.After
			return fixture.Unless(!after.IsZero() && !after.Time.Before(clicked), fmt.Sprintf("spec.rollout.after %v", after))
		})
		admin.waitFor("the old worker replaced by a Running new one", 3*time.Minute,
			fmt.Sprintf(`((old, ms) => !ms.some(m => old.includes(m.dataset.name)) && ms.some(m => m.dataset.name?.startsWith('web-b-md-0-') && m.textContent.includes('Running')))(%s, [...document.querySelectorAll('[data-testid=tree] [data-kind=Machine]')])`, oldJSON),
			`document.querySelector('[data-testid=tree]')?.innerText`)
		seen := eval[[]string](admin, `[...window.capstanRollout.seen].sort()`)
		t.Logf("the tree showed during the rollout: %v", seen)
		if !eval[bool](admin, `window.capstanRollout.both`) {
			t.Errorf("the tree never showed the old and the new worker Machines together: %v", seen)
		}
		var risingNew bool
		for _, s := range seen {
			name, phase, _ := strings.Cut(s, " ")
			if !slices.Contains(old, name) && phase != "" && phase != string(clusterv1.MachinePhaseRunning) {
				risingNew = true
			}
		}
		if !risingNew {
			t.Errorf("the tree never showed the new worker Machine before it was Running: %v", seen)
		}
		admin.shot("rolled-out")
	})

	t.Run("refused by RBAC", func(t *testing.T) {
		viewer := viewerKubeconfig(t, c, kubeconfig)
		viewerURL, _ := startConsole(t, viewer)
		tb := b.open(t, viewerURL)
		tb.do("opening web-a as the viewer", navigateHash("#/clusters/default/web-a"))
		tb.click(`[data-action=scale][data-target="MachineDeployment/web-a-md-0"]`)
		tb.do("typing 4 replicas", fill(`[data-testid=replicas]`, "4")...)
		tb.click(`[data-testid=confirm-ok]`)
		tb.waitFor("the refusal", 20*time.Second, `!document.querySelector('[data-testid=error]').hidden`, "")
		shown := tb.text(`[data-testid=error]`)
		if !strings.Contains(shown, "forbidden") || !strings.Contains(shown, "console-viewer") {
			t.Errorf("the error shows %q, want the API server's 403 naming the user", shown)
		}
		// The viewer may read the provider objects but not their CRDs: the
		// tree shows them all the same (their versions from discovery).
		// The workload's Nodes need the kubeconfig Secret, which the viewer
		// may not read: that is said, not silently missing.
		if w := tb.text(`[data-testid=warnings]`); w != "" {
			t.Errorf("the viewer's cluster view warns %q, want nothing: every object of the tree is readable", w)
		}
		if !eval[bool](tb, `!!document.querySelector('[data-testid=tree] [data-kind=InMemoryCluster][data-name=web-a] .dot.ok')`) {
			t.Errorf("the viewer's tree does not show InMemoryCluster web-a as ready:\n%s", tb.text(`[data-testid=tree]`))
		}
		if e := tb.text(`#cluster-view .list-error`); !strings.Contains(e, "web-a-kubeconfig") || !strings.Contains(e, "forbidden") {
			t.Errorf("the viewer's Nodes say %q, want why they cannot be read (the kubeconfig Secret is forbidden)", e)
		}
		tb.shot("refused")
		got := &clusterv1.MachineDeployment{}
		if err := c.Get(ctx, md, got); err != nil {
			t.Fatal(err)
		}
		if got.Spec.Replicas == nil || *got.Spec.Replicas != 1 {
			t.Errorf("web-a-md-0 has %v replicas after a refused scale, want 1 still", got.Spec.Replicas)
		}
	})

	t.Run("remediation", func(t *testing.T) {
		admin.t = t
		admin.do("opening web-a", navigateHash("#/clusters/default/web-a"))
		var worker clusterv1.Machine
		fixture.Eventually(t, "web-a-md-0's one Machine with its Node", 2*time.Minute, func(ctx context.Context) string {
			list := &clusterv1.MachineList{}
			if err := c.List(ctx, list, client.InNamespace("default"), client.MatchingLabels{clusterv1.MachineDeploymentNameLabel: "web-a-md-0"}); err != nil {
				return err.Error()
			}
			if len(list.Items) != 1 || list.Items[0].Status.NodeRef.Name == "" || !list.Items[0].DeletionTimestamp.IsZero() {
				return fmt.Sprintf("%d Machines", len(list.Items))
			}
			worker = list.Items[0]
			return ""
		})
		fixture.Create(t, c, &clusterv1.MachineHealthCheck{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-a-workers"},
			Spec: clusterv1.MachineHealthCheckSpec{
				ClusterName: "web-a",
				Selector:    metav1.LabelSelector{MatchLabels: map[string]string{clusterv1.MachineDeploymentNameLabel: "web-a-md-0"}},
				Checks: clusterv1.MachineHealthCheckChecks{UnhealthyNodeConditions: []clusterv1.UnhealthyNodeCondition{
					{Type: corev1.NodeReady, Status: corev1.ConditionFalse, TimeoutSeconds: ptr.To[int32](1)},
				}},
			},
		})
		// The worker's Node goes NotReady, as a stopped kubelet leaves it.
		workload := workloadOf(t, p, "web-a")
		node, err := workload.CoreV1().Nodes().Get(ctx, worker.Status.NodeRef.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range node.Status.Conditions {
			if node.Status.Conditions[i].Type == corev1.NodeReady {
				node.Status.Conditions[i].Status, node.Status.Conditions[i].Reason = corev1.ConditionFalse, "KubeletStopped"
				node.Status.Conditions[i].Message = "the test stopped the kubelet"
			}
		}
		if _, err := workload.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		treeText := `document.querySelector('[data-testid=tree]')?.innerText`
		// The verdict stays in the timeline after the Machine is gone.
		admin.waitFor("the MachineHealthCheck's verdict on "+worker.Name+" in the events", time.Minute,
			fmt.Sprintf(`[...document.querySelectorAll('[data-testid=events] tr')].some(r => r.textContent.includes('MachineMarkedUnhealthy') && r.textContent.includes(%s))`, jsString(worker.Name)),
			`document.querySelector('[data-testid=events]')?.innerText`)
		admin.waitFor("a Running replacement, and "+worker.Name+" gone", 3*time.Minute,
			fmt.Sprintf(`(ms => !ms.some(m => m.dataset.name === %s) && ms.some(m => m.dataset.name.startsWith('web-a-md-0-') && m.textContent.includes('Running')))([...document.querySelectorAll('[data-testid=tree] [data-kind=Machine]')])`,
				jsString(worker.Name)), treeText)
		admin.shot("remediated")
	})
	t.Logf("the console's browser test took %s", time.Since(started).Round(time.Second))
}

// viewerKubeconfig is the plane's kubeconfig acting as console-viewer, a
// user bound to a role that reads the Cluster API kinds and changes nothing.
func viewerKubeconfig(t *testing.T, c client.Client, adminKubeconfig string) string {
	t.Helper()
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "console-viewer"},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{"cluster.x-k8s.io", "infrastructure.cluster.x-k8s.io", "bootstrap.cluster.x-k8s.io", "controlplane.cluster.x-k8s.io"},
			Resources: []string{"*"}, Verbs: []string{"get", "list", "watch"},
		}, {
			APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"get", "list", "watch"},
		}},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "console-viewer"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "console-viewer"}},
	}
	fixture.Create(t, c, role, binding)
	cfg, err := clientcmd.LoadFromFile(adminKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, user := range cfg.AuthInfos {
		user.Impersonate = "console-viewer"
	}
	path := filepath.Join(t.TempDir(), "viewer.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}
