package console

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	controlplanev1 "capstan.dev/capstan/api/controlplane/kubeadm/v1beta2"
	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	inmemoryv1 "capstan.dev/capstan/api/infrastructure/inmemory/v1beta2"
	"capstan.dev/capstan/internal/describe"
	"capstan.dev/capstan/test/fixture"
)

// browser is a signed-in console session, as a browser holds it.
type browser struct {
	t    testing.TB
	base string
	http *http.Client
	csrf string
}

// startConsole runs a console until the test ends
// and signs a browser in through its URL.
func startConsole(t testing.TB, opts Options) (*Server, *browser) {
	t.Helper()
	srv, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := srv.Listen(0)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("console stopped: %v", err)
		}
	})
	jar, _ := cookiejar.New(nil)
	b := &browser{t: t, base: strings.SplitN(srv.URL(), "/#", 2)[0], http: &http.Client{Jar: jar, Timeout: 30 * time.Second}}
	if status, body := b.login(srv.URL(), nil); status != http.StatusOK {
		t.Fatalf("signing in with %s: %d %s", srv.URL(), status, body)
	}
	var session map[string]string
	b.getJSON("/api/session", http.StatusOK, &session)
	if b.csrf = session["csrfToken"]; b.csrf == "" {
		t.Fatalf("session without a CSRF token: %v", session)
	}
	return srv, b
}

// login does what the page does with the URL it was opened at: it posts
// the token of the URL's fragment to /api/login, with header added.
func (b *browser) login(url string, header map[string]string) (int, []byte) {
	b.t.Helper()
	_, token, ok := strings.Cut(url, "/#token=")
	if !ok {
		b.t.Fatalf("console URL %s has no #token= fragment", url)
	}
	req, _ := http.NewRequest(http.MethodPost, b.base+"/api/login", strings.NewReader(`{"token":"`+token+`"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", b.base)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	return b.do(req)
}

func (b *browser) do(req *http.Request) (int, []byte) {
	b.t.Helper()
	resp, err := b.http.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, body
}

func (b *browser) getJSON(path string, want int, into any) {
	b.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, b.base+path, nil)
	status, body := b.do(req)
	if status != want {
		b.t.Fatalf("GET %s: %d %s, want %d", path, status, body, want)
	}
	if into != nil {
		if err := json.Unmarshal(body, into); err != nil {
			b.t.Fatalf("GET %s: %v in %s", path, err, body)
		}
	}
}

// csrfOf is b's session's CSRF token.
func (b *browser) csrfOf() string {
	b.t.Helper()
	var session map[string]string
	b.getJSON("/api/session", http.StatusOK, &session)
	return session["csrfToken"]
}

// post sends an action as the console page does.
func (b *browser) post(path string, body any) (int, errorReply) {
	b.t.Helper()
	data, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, b.base+path, strings.NewReader(string(data)))
	req.Header.Set("X-CSRF-Token", b.csrf)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", b.base)
	status, out := b.do(req)
	var reply errorReply
	_ = json.Unmarshal(out, &reply)
	return status, reply
}

// demo is a Cluster with a KubeadmControlPlane, an infrastructure cluster,
// a MachineDeployment with a Machine whose Node lives in the workload
// cluster (the test plane itself, through the kubeconfig Secret).
type demo struct {
	ns, name, node string
}

func createDemo(t *testing.T, ns string) demo {
	t.Helper()
	ctx := context.Background()
	d := demo{ns: ns, name: "demo", node: ns + "-node"}
	infra := &inmemoryv1.InMemoryCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "demo"}}
	kcp := &controlplanev1.KubeadmControlPlane{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "demo-cp",
		Labels: map[string]string{clusterv1.ClusterNameLabel: "demo"}},
		Spec: controlplanev1.KubeadmControlPlaneSpec{Replicas: ptr.To[int32](1), Version: "v1.35.0",
			MachineTemplate: controlplanev1.KubeadmControlPlaneMachineTemplate{Spec: controlplanev1.KubeadmControlPlaneMachineTemplateSpec{
				InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: inmemoryv1.GroupVersion.Group, Kind: "InMemoryMachineTemplate", Name: "cp"}}}}}
	cluster := fixture.NewCluster(ns, "demo", fixture.Infrastructure(infra), fixture.ControlPlane(kcp))
	cluster.Labels = map[string]string{"env": "test"}
	inDemo := map[string]string{clusterv1.ClusterNameLabel: "demo", clusterv1.MachineDeploymentNameLabel: "demo-md"}
	template := clusterv1.MachineSpec{ClusterName: "demo", Version: "v1.35.0",
		Bootstrap:         clusterv1.Bootstrap{DataSecretName: ptr.To("none")},
		InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: inmemoryv1.GroupVersion.Group, Kind: "InMemoryMachine", Name: "demo-md-m1"}}
	md := &clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "demo-md", Labels: inDemo},
		Spec: clusterv1.MachineDeploymentSpec{ClusterName: "demo", Replicas: ptr.To[int32](1),
			Selector: metav1.LabelSelector{MatchLabels: inDemo},
			Template: clusterv1.MachineTemplateSpec{ObjectMeta: clusterv1.ObjectMeta{Labels: inDemo}, Spec: template}}}
	machine := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "demo-md-m1", Labels: inDemo}, Spec: template}
	secret := fixture.KubeconfigSecret(t, env, ns, "demo")
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: d.node, Labels: map[string]string{"node-role.kubernetes.io/worker": ""}},
		Spec: corev1.NodeSpec{ProviderID: "in-memory://" + d.node}}
	fixture.Create(t, env.Client, infra, kcp, cluster, md, machine, secret, node)
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), node) })

	machine.Status.NodeRef = clusterv1.MachineNodeReference{Name: d.node}
	if err := env.Client.Status().Update(ctx, machine); err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	cluster.Status.Phase = string(clusterv1.ClusterPhaseProvisioned)
	cluster.Status.ControlPlane = &clusterv1.ClusterControlPlaneStatus{DesiredReplicas: ptr.To[int32](1), ReadyReplicas: ptr.To[int32](1), UpToDateReplicas: ptr.To[int32](1)}
	cluster.Status.Conditions = []metav1.Condition{
		{Type: clusterv1.AvailableCondition, Status: metav1.ConditionFalse, Reason: "NotAvailable", Message: "workers are not available", LastTransitionTime: now},
		{Type: clusterv1.ClusterWorkersAvailableCondition, Status: metav1.ConditionFalse, Reason: "NotAvailable", Message: "0 of 1 available", LastTransitionTime: now},
		{Type: clusterv1.PausedCondition, Status: metav1.ConditionFalse, Reason: "NotPaused", LastTransitionTime: now},
		{Type: clusterv1.RollingOutCondition, Status: metav1.ConditionTrue, Reason: "RollingOut", Message: "1 Machine is not up to date", LastTransitionTime: now},
		{Type: clusterv1.InfrastructureReadyCondition, Status: metav1.ConditionTrue, Reason: "Ready", LastTransitionTime: now},
	}
	if err := env.Client.Status().Update(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	return d
}

// A session ends after its lifetime, whatever the browser does, and whoever
// showed the console's URL hears of the new one when the old was used.
func TestSessionsEndAndTheURLMovesOn(t *testing.T) {
	urls := make(chan string, 4)
	srv, b := startConsole(t, Options{Config: env.Config, SessionLifetime: 2 * time.Second, OnURL: func(u string) { urls <- u }})
	select {
	case u := <-urls:
		if u != srv.URL() {
			t.Errorf("OnURL got %s, the console's URL is %s", u, srv.URL())
		}
	default:
		t.Error("signing in did not report the console's new URL")
	}
	b.getJSON("/api/clusters", http.StatusOK, nil)
	time.Sleep(2500 * time.Millisecond)
	b.getJSON("/api/clusters", http.StatusUnauthorized, nil)
	b.getJSON("/api/session", http.StatusUnauthorized, nil)
}

func TestConsole(t *testing.T) {
	ns := env.Namespace(t)
	d := createDemo(t, ns)
	srv, b := startConsole(t, Options{Config: env.Config})
	clusterPath := "/api/clusters/" + ns + "/demo"

	t.Run("security", func(t *testing.T) {
		anonymous := &http.Client{Timeout: 5 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := anonymous.Get(b.base + "/api/clusters")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("/api/clusters without the cookie: %d, want 401", resp.StatusCode)
		}
		// The token travels in the fragment only; the query string signs
		// nothing in, even with the right token.
		current := srv.URL()
		if !strings.Contains(current, "/#token=") || strings.Contains(current, "?") {
			t.Errorf("console URL %s: want the token in its fragment only", current)
		}
		_, token, _ := strings.Cut(current, "#token=")
		resp, err = anonymous.Get(b.base + "/?token=" + token)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || len(resp.Cookies()) != 0 {
			t.Errorf("the token in the query string: %d with cookies %v, want 400 and none", resp.StatusCode, resp.Cookies())
		}
		jar, _ := cookiejar.New(nil)
		other := &browser{t: t, base: b.base, http: &http.Client{Jar: jar, Timeout: 5 * time.Second}}
		if status, _ := other.login(b.base+"/#token=0123abcd", nil); status != http.StatusUnauthorized {
			t.Errorf("a wrong token: %d, want 401", status)
		}
		for name, header := range map[string]map[string]string{
			"foreign Origin":       {"Origin": "http://evil.example"},
			"another port's page":  {"Origin": "http://127.0.0.1:1"},
			"cross-site fetch":     {"Sec-Fetch-Site": "same-site"},
			"form post":            {"Content-Type": "application/x-www-form-urlencoded"},
			"Host of another port": {"Host": "127.0.0.1:1"},
		} {
			req, _ := http.NewRequest(http.MethodPost, b.base+"/api/login", strings.NewReader(`{"token":"`+token+`"}`))
			req.Header.Set("Content-Type", "application/json")
			for k, v := range header {
				req.Header.Set(k, v)
			}
			if h, ok := header["Host"]; ok {
				req.Host = h
			}
			if status, body := other.do(req); status < 400 || status >= 500 || status == http.StatusUnauthorized {
				t.Errorf("login with a %s: %d %s, want a refusal", name, status, body)
			}
		}
		if srv.URL() != current {
			t.Fatal("a refused login replaced the token")
		}
		// The exchange sets one cookie bound to this console's port, and
		// the token it used signs in no one else: the URL is spent.
		req, _ := http.NewRequest(http.MethodPost, b.base+"/api/login", strings.NewReader(`{"token":"`+token+`"}`))
		req.Header.Set("Content-Type", "application/json")
		resp, err = anonymous.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		cookies := resp.Cookies()
		if resp.StatusCode != http.StatusOK || len(cookies) != 1 || !cookies[0].HttpOnly || cookies[0].SameSite != http.SameSiteStrictMode ||
			!strings.HasSuffix(cookies[0].Name, "_"+strings.TrimPrefix(b.base, "http://127.0.0.1:")) ||
			cookies[0].MaxAge != int(DefaultSessionLifetime/time.Second) {
			t.Errorf("the token's exchange: %d with cookies %+v, want 200 and one HttpOnly SameSite=Strict cookie named for the port, ending with the session", resp.StatusCode, cookies)
		}
		if srv.URL() == current {
			t.Error("the access token was not replaced after signing in")
		}
		if status, _ := other.login(current, nil); status != http.StatusUnauthorized {
			t.Errorf("signing in again with a used URL: %d, want 401", status)
		}
		if status, body := other.login(srv.URL(), nil); status != http.StatusOK {
			t.Errorf("signing in with the new URL: %d %s", status, body)
		}
		// Every answer, the page's and the API's, carries a policy that
		// allows no inline script and no other origin.
		for _, path := range []string{"/", "/app.js", "/api/clusters"} {
			req, _ := http.NewRequest(http.MethodGet, b.base+path, nil)
			resp, err := b.http.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			csp := resp.Header.Get("Content-Security-Policy")
			if !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "script-src 'self';") || strings.Contains(csp, "unsafe") {
				t.Errorf("GET %s: Content-Security-Policy %q, want default-src 'none' and script-src 'self' only", path, csp)
			}
		}

		// A page of another site whose name resolves to 127.0.0.1.
		req, _ = http.NewRequest(http.MethodGet, b.base+"/api/clusters", nil)
		req.Host = "evil.example:8497"
		if status, body := b.do(req); status != http.StatusForbidden {
			t.Errorf("Host evil.example: %d %s, want 403", status, body)
		}

		for name, header := range map[string]map[string]string{
			"no CSRF token":                {},
			"wrong CSRF token":             {"X-CSRF-Token": "nope"},
			"foreign Origin":               {"X-CSRF-Token": b.csrf, "Origin": "http://evil.example"},
			"another session's CSRF token": {"X-CSRF-Token": other.csrfOf()},
		} {
			req, _ := http.NewRequest(http.MethodPost, b.base+clusterPath+"/pause", strings.NewReader(`{"paused":true}`))
			for k, v := range header {
				req.Header.Set(k, v)
			}
			if status, body := b.do(req); status != http.StatusForbidden {
				t.Errorf("%s: %d %s, want 403", name, status, body)
			}
		}
		req, _ = http.NewRequest(http.MethodGet, b.base+clusterPath+"/pause", nil)
		if status, _ := b.do(req); status != http.StatusMethodNotAllowed {
			t.Errorf("GET of an action: %d, want 405", status)
		}
		c := &clusterv1.Cluster{}
		if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "demo"}, c); err != nil || ptr.Deref(c.Spec.Paused, false) {
			t.Errorf("a refused pause paused the Cluster (%v)", err)
		}
	})

	t.Run("fleet", func(t *testing.T) {
		var fleet struct {
			Clusters []ClusterSummary `json:"clusters"`
			Error    string           `json:"error"`
		}
		b.getJSON("/api/clusters", http.StatusOK, &fleet)
		i := slices.IndexFunc(fleet.Clusters, func(s ClusterSummary) bool { return s.Namespace == ns && s.Name == "demo" })
		if fleet.Error != "" || i < 0 {
			t.Fatalf("fleet without demo (error %q): %+v", fleet.Error, fleet.Clusters)
		}
		s := fleet.Clusters[i]
		if s.Available.Status != "False" || s.Available.Message != "workers are not available" || s.Phase != "Provisioned" || s.Labels["env"] != "test" {
			t.Errorf("summary: %+v", s)
		}
		if ptr.Deref(s.ControlPlane.Desired, -1) != 1 || ptr.Deref(s.ControlPlane.Ready, -1) != 1 || s.Workers.Desired != nil {
			t.Errorf("counts: control plane %+v, workers %+v; want 1/1 and none", s.ControlPlane, s.Workers)
		}
		want := []string{"Available: workers are not available", "WorkersAvailable: 0 of 1 available", "RollingOut: 1 Machine is not up to date"}
		if !slices.Equal(s.Problems, want) {
			t.Errorf("problems %q, want %q (Paused False and InfrastructureReady True are fine)", s.Problems, want)
		}
	})

	t.Run("detail", func(t *testing.T) {
		var detail Detail
		b.getJSON(clusterPath, http.StatusOK, &detail)
		if detail.Tree == nil || detail.Tree.Name != "demo" || detail.Summary.Name != "demo" {
			t.Fatalf("detail: %+v", detail)
		}
		var kinds []string
		var walk func(n *describe.Node)
		walk = func(n *describe.Node) {
			kinds = append(kinds, n.Kind+"/"+n.Name)
			for _, c := range n.Children {
				walk(c)
			}
		}
		walk(detail.Tree)
		for _, want := range []string{"Cluster/demo", "InMemoryCluster/demo", "KubeadmControlPlane/demo-cp", "MachineDeployment/demo-md", "Machine/demo-md-m1"} {
			if !slices.Contains(kinds, want) {
				t.Errorf("tree without %s: %v", want, kinds)
			}
		}
		if len(detail.Tree.Conditions) == 0 {
			t.Errorf("the tree shows no conditions besides the summary: %+v", detail.Tree)
		}
		if detail.NodesError != "" || len(detail.Nodes) == 0 {
			t.Fatalf("nodes: %+v (%s)", detail.Nodes, detail.NodesError)
		}
		i := slices.IndexFunc(detail.Nodes, func(n NodeInfo) bool { return n.Name == d.node })
		if i < 0 || detail.Nodes[i].Machine != "demo-md-m1" || !slices.Equal(detail.Nodes[i].Roles, []string{"worker"}) || detail.Nodes[i].ProviderID != "in-memory://"+d.node {
			t.Errorf("node %s beside its Machine: %+v", d.node, detail.Nodes)
		}
		wantScale := []ScaleTarget{{Kind: "ControlPlane", Name: "demo-cp", Replicas: 1}, {Kind: "MachineDeployment", Name: "demo-md", Replicas: 1}}
		if !slices.Equal(detail.Actions.Scale, wantScale) || len(detail.Actions.RolloutRestart) != 2 || !detail.Actions.Pause {
			t.Errorf("actions %+v, want scale %+v, two restarts and pause", detail.Actions, wantScale)
		}
		var missing errorReply
		b.getJSON("/api/clusters/"+ns+"/nope", http.StatusNotFound, &missing)
		if missing.Code != 404 || !strings.Contains(missing.Error, "nope") {
			t.Errorf("a missing cluster: %+v", missing)
		}
	})

	t.Run("live", func(t *testing.T) {
		events := b.stream(t, "/api/watch?cluster="+ns+"/demo")
		waitFor := func(what string, within time.Duration, match func(sseEvent) bool) {
			t.Helper()
			deadline := time.After(within)
			for {
				select {
				case e, ok := <-events:
					if !ok {
						t.Fatalf("the stream ended before %s", what)
					}
					if match(e) {
						return
					}
				case <-deadline:
					t.Fatalf("%s: not within %s", what, within)
				}
			}
		}
		waitFor("demo's row at connect", 5*time.Second, func(e sseEvent) bool {
			return e.name == "cluster" && strings.Contains(e.data, `"name":"demo"`) && strings.Contains(e.data, `"namespace":"`+ns+`"`)
		})
		waitFor("demo's detail at connect", 5*time.Second, func(e sseEvent) bool { return e.name == "detail" })

		m := &clusterv1.Machine{}
		if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "demo-md-m1"}, m); err != nil {
			t.Fatal(err)
		}
		m.Status.Conditions = []metav1.Condition{{Type: clusterv1.ReadyCondition, Status: metav1.ConditionFalse, Reason: "Probing", Message: "live-change-marker", LastTransitionTime: metav1.Now()}}
		if err := env.Client.Status().Update(context.Background(), m); err != nil {
			t.Fatal(err)
		}
		waitFor("the Machine's change in the detail", time.Second, func(e sseEvent) bool {
			return e.name == "detail" && strings.Contains(e.data, "live-change-marker")
		})

		// The control plane is a provider object: the console follows its
		// kind once a view has shown it.
		kcp := &controlplanev1.KubeadmControlPlane{}
		if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "demo-cp"}, kcp); err != nil {
			t.Fatal(err)
		}
		kcp.Status.Conditions = []metav1.Condition{{Type: clusterv1.AvailableCondition, Status: metav1.ConditionFalse, Reason: "Probing", Message: "control-plane-marker", LastTransitionTime: metav1.Now()}}
		if err := env.Client.Status().Update(context.Background(), kcp); err != nil {
			t.Fatal(err)
		}
		waitFor("the control plane's change in the detail", time.Second, func(e sseEvent) bool {
			return e.name == "detail" && strings.Contains(e.data, "control-plane-marker")
		})

		gone := fixture.NewCluster(ns, "gone", fixture.Infrastructure(&inmemoryv1.InMemoryCluster{ObjectMeta: metav1.ObjectMeta{Name: "gone"}}))
		fixture.Create(t, env.Client, gone)
		waitFor("a new Cluster's row", time.Second, func(e sseEvent) bool {
			return e.name == "cluster" && strings.Contains(e.data, `"name":"gone"`)
		})
		if err := env.Client.Delete(context.Background(), gone); err != nil {
			t.Fatal(err)
		}
		waitFor("a deleted Cluster's removal", time.Second, func(e sseEvent) bool {
			return e.name == "cluster-deleted" && e.data == `{"name":"gone","namespace":"`+ns+`"}`
		})
	})

	t.Run("actions", func(t *testing.T) {
		ctx := context.Background()
		if status, reply := b.post(clusterPath+"/scale", map[string]any{"kind": "MachineDeployment", "name": "demo-md", "replicas": 3}); status != http.StatusOK {
			t.Fatalf("scale: %d %+v", status, reply)
		}
		md := &clusterv1.MachineDeployment{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo-md"}, md); err != nil || ptr.Deref(md.Spec.Replicas, 0) != 3 {
			t.Errorf("MachineDeployment replicas %v after scaling to 3 (%v)", md.Spec.Replicas, err)
		}
		if status, reply := b.post(clusterPath+"/scale", map[string]any{"kind": "ControlPlane", "name": "demo-cp", "replicas": 3}); status != http.StatusOK {
			t.Fatalf("scale the control plane: %d %+v", status, reply)
		}
		kcp := &controlplanev1.KubeadmControlPlane{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo-cp"}, kcp); err != nil || ptr.Deref(kcp.Spec.Replicas, 0) != 3 {
			t.Errorf("KubeadmControlPlane replicas %v after scaling to 3 (%v)", kcp.Spec.Replicas, err)
		}
		// The API server's refusal comes back as it is: an even control plane.
		if status, reply := b.post(clusterPath+"/scale", map[string]any{"kind": "ControlPlane", "name": "demo-cp", "replicas": 2}); status != http.StatusUnprocessableEntity || !strings.Contains(reply.Error, "odd") {
			t.Errorf("scaling the control plane to 2: %d %+v, want 422 naming odd counts", status, reply)
		}
		if status, reply := b.post(clusterPath+"/rollout-restart", map[string]any{"kind": "MachineDeployment", "name": "demo-md"}); status != http.StatusOK {
			t.Fatalf("rollout restart: %d %+v", status, reply)
		}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo-md"}, md); err != nil || md.Spec.Rollout.After.IsZero() {
			t.Errorf("MachineDeployment rollout.after %v after a restart (%v)", md.Spec.Rollout.After, err)
		}
		if status, reply := b.post(clusterPath+"/rollout-restart", map[string]any{"kind": "ControlPlane", "name": "demo-cp"}); status != http.StatusOK {
			t.Fatalf("control plane rollout restart: %d %+v", status, reply)
		}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo-cp"}, kcp); err != nil || kcp.Spec.Rollout.After.IsZero() {
			t.Errorf("KubeadmControlPlane rollout.after %v after a restart (%v)", kcp.Spec.Rollout.After, err)
		}
		if status, reply := b.post(clusterPath+"/pause", map[string]any{"paused": true}); status != http.StatusOK {
			t.Fatalf("pause: %d %+v", status, reply)
		}
		c := &clusterv1.Cluster{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo"}, c); err != nil || !ptr.Deref(c.Spec.Paused, false) {
			t.Errorf("Cluster spec.paused %v after pause (%v)", c.Spec.Paused, err)
		}
		if status, reply := b.post(clusterPath+"/pause", map[string]any{"paused": false}); status != http.StatusOK {
			t.Fatalf("resume: %d %+v", status, reply)
		}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo"}, c); err != nil || c.Spec.Paused != nil {
			t.Errorf("Cluster spec.paused %v after resume (%v)", c.Spec.Paused, err)
		}
		if status, reply := b.post(clusterPath+"/scale", map[string]any{"kind": "MachineDeployment", "name": "demo-md", "replicas": -1}); status != http.StatusBadRequest || !strings.Contains(reply.Error, "replicas") {
			t.Errorf("scaling to -1: %d %+v, want 400 naming replicas", status, reply)
		}

		req, _ := http.NewRequest(http.MethodPost, b.base+clusterPath+"/kubeconfig", nil)
		req.Header.Set("X-CSRF-Token", b.csrf)
		resp, err := b.http.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		secret := fixture.KubeconfigSecret(t, env, ns, "demo")
		if resp.StatusCode != http.StatusOK || string(body) != string(secret.Data["value"]) ||
			resp.Header.Get("Content-Type") != "application/yaml" || !strings.Contains(resp.Header.Get("Content-Disposition"), `demo.kubeconfig`) {
			t.Errorf("kubeconfig download: %d %s %q", resp.StatusCode, resp.Header, body)
		}
	})

	t.Run("topology", func(t *testing.T) {
		// A managed Cluster is scaled and restarted through its topology:
		// its controller would put a changed MachineDeployment back.
		ctx := context.Background()
		topo := fixture.NewCluster(ns, "topo")
		topo.Spec.Topology = clusterv1.Topology{ClassRef: clusterv1.ClusterClassRef{Name: "none"}, Version: "v1.35.0",
			ControlPlane: clusterv1.ControlPlaneTopology{Replicas: ptr.To[int32](1)},
			Workers: clusterv1.WorkersTopology{MachineDeployments: []clusterv1.MachineDeploymentTopology{
				{Class: "default", Name: "md-a", Replicas: ptr.To[int32](1)}, {Class: "default", Name: "md-b", Replicas: ptr.To[int32](1)}}}}
		inTopo := map[string]string{clusterv1.ClusterNameLabel: "topo", clusterv1.ClusterTopologyMachineDeploymentNameLabel: "md-b"}
		md := &clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "topo-md-b-x1", Labels: inTopo},
			Spec: clusterv1.MachineDeploymentSpec{ClusterName: "topo", Replicas: ptr.To[int32](1),
				Selector: metav1.LabelSelector{MatchLabels: inTopo},
				Template: clusterv1.MachineTemplateSpec{ObjectMeta: clusterv1.ObjectMeta{Labels: inTopo}, Spec: clusterv1.MachineSpec{
					ClusterName: "topo", Version: "v1.35.0", Bootstrap: clusterv1.Bootstrap{DataSecretName: ptr.To("none")},
					InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: inmemoryv1.GroupVersion.Group, Kind: "InMemoryMachine", Name: "x"}}}}}
		fixture.Create(t, env.Client, topo, md)
		path := "/api/clusters/" + ns + "/topo"
		if status, reply := b.post(path+"/scale", map[string]any{"kind": "MachineDeployment", "name": md.Name, "replicas": 4}); status != http.StatusOK {
			t.Fatalf("scale: %d %+v", status, reply)
		}
		if status, reply := b.post(path+"/scale", map[string]any{"kind": "ControlPlane", "name": "", "replicas": 3}); status != http.StatusOK {
			t.Fatalf("scale the control plane: %d %+v", status, reply)
		}
		if status, reply := b.post(path+"/rollout-restart", map[string]any{"kind": "MachineDeployment", "name": md.Name}); status != http.StatusOK {
			t.Fatalf("restart: %d %+v", status, reply)
		}
		got := &clusterv1.Cluster{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(topo), got); err != nil {
			t.Fatal(err)
		}
		workers := got.Spec.Topology.Workers.MachineDeployments
		if ptr.Deref(workers[1].Replicas, 0) != 4 || ptr.Deref(workers[0].Replicas, 0) != 1 || workers[1].Rollout.After.IsZero() || !workers[0].Rollout.After.IsZero() ||
			ptr.Deref(got.Spec.Topology.ControlPlane.Replicas, 0) != 3 {
			t.Errorf("topology after scaling md-b to 4, the control plane to 3 and restarting md-b: %+v", got.Spec.Topology)
		}
		after := &clusterv1.MachineDeployment{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(md), after); err != nil || after.Generation != 1 {
			t.Errorf("the topology's MachineDeployment itself was changed: generation %d (%v)", after.Generation, err)
		}
	})

	t.Run("silent workload cluster", func(t *testing.T) {
		// A workload API server that accepts connections and never answers.
		silent, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer silent.Close()
		go func() {
			for {
				conn, err := silent.Accept()
				if err != nil {
					return
				}
				defer conn.Close()
			}
		}()
		quiet := fixture.NewCluster(ns, "quiet", fixture.Infrastructure(&inmemoryv1.InMemoryCluster{ObjectMeta: metav1.ObjectMeta{Name: "quiet"}}))
		fixture.Create(t, env.Client, quiet, fixture.KubeconfigSecretVia(t, env, ns, "quiet", "https://"+silent.Addr().String()))
		started := time.Now()
		var detail Detail
		b.getJSON("/api/clusters/"+ns+"/quiet", http.StatusOK, &detail)
		if took := time.Since(started); took > 4*time.Second {
			t.Errorf("the detail of a cluster whose workload API server is silent took %s, want about 2s", took)
		}
		if len(detail.Nodes) != 0 || !strings.Contains(detail.NodesError, "did not answer") {
			t.Errorf("nodes %+v, nodesError %q; want none and why", detail.Nodes, detail.NodesError)
		}
	})

	t.Run("restricted user", func(t *testing.T) {
		viewer := restrictedUser(t, ns, "console-viewer", clusterv1.GroupVersion.Group, controlplanev1.GroupVersion.Group, inmemoryv1.GroupVersion.Group)
		ctx := context.Background()
		// Conditions for the viewer's tree to show.
		infra := &inmemoryv1.InMemoryCluster{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo"}, infra); err != nil {
			t.Fatal(err)
		}
		now := metav1.Now()
		infra.Status.Conditions = []metav1.Condition{
			{Type: clusterv1.ReadyCondition, Status: metav1.ConditionTrue, Reason: "Provisioned", LastTransitionTime: now},
			{Type: clusterv1.PausedCondition, Status: metav1.ConditionFalse, Reason: "NotPaused", LastTransitionTime: now},
		}
		if err := env.Client.Status().Update(ctx, infra); err != nil {
			t.Fatal(err)
		}
		// This console starts watching on first use, as the plane's does.
		_, vb := startConsole(t, Options{Config: viewer, StartOnFirstUse: true})
		md := &clusterv1.MachineDeployment{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo-md"}, md); err != nil {
			t.Fatal(err)
		}
		status, reply := vb.post(clusterPath+"/scale", map[string]any{"kind": "MachineDeployment", "name": "demo-md", "replicas": 5})
		if status != http.StatusForbidden || reply.Code != 403 || !strings.Contains(reply.Error, "forbidden") || !strings.Contains(reply.Error, "console-viewer") {
			t.Errorf("a viewer's scale: %d %+v, want the API server's 403", status, reply)
		}
		after := &clusterv1.MachineDeployment{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo-md"}, after); err != nil || after.ResourceVersion != md.ResourceVersion {
			t.Errorf("a refused scale changed the MachineDeployment: %v → %v (%v)", md.Spec.Replicas, after.Spec.Replicas, err)
		}
		var detail Detail
		vb.getJSON(clusterPath, http.StatusOK, &detail)
		if len(detail.Nodes) != 0 || !strings.Contains(detail.NodesError, "demo-kubeconfig") {
			t.Errorf("a viewer who may not read Secrets: nodes %+v, nodesError %q", detail.Nodes, detail.NodesError)
		}
		if status, reply := vb.post(clusterPath+"/kubeconfig", nil); status != http.StatusForbidden {
			t.Errorf("a viewer's kubeconfig download: %d %+v, want 403", status, reply)
		}

		// The viewer may read the provider objects but not their CRDs:
		// their versions come from discovery, and the tree shows them.
		if len(detail.Warnings) != 0 {
			t.Errorf("warnings for a viewer who may read the provider objects: %q", detail.Warnings)
		}
		infraNode, cpNode := treeNode(detail.Tree, "InMemoryCluster", "demo"), treeNode(detail.Tree, "KubeadmControlPlane", "demo-cp")
		if infraNode == nil || infraNode.Status == nil || infraNode.Status.Reason != "Provisioned" ||
			len(infraNode.Conditions) != 1 || infraNode.Conditions[0].Reason != "NotPaused" {
			t.Errorf("the infrastructure's row: %+v, want Ready by Provisioned and Paused by NotPaused", infraNode)
		}
		if cpNode == nil || (cpNode.Status != nil && cpNode.Status.Reason == clusterv1.ObjectDoesNotExistReason) {
			t.Errorf("the control plane's row: %+v, want the object read", cpNode)
		}

		// The same through describe.Read, as `capstan describe` reads.
		c, err := client.New(viewer, client.Options{Scheme: env.Client.Scheme()})
		if err != nil {
			t.Fatal(err)
		}
		var warnings []string
		warn := func(what string, err error) { warnings = append(warnings, what+": "+err.Error()) }
		// Without discovery the viewer sees no provider object: the CRD
		// is really out of reach, so what follows proves the fallback.
		// (The cluster's infrastructure, its control plane and the kind of
		// its Machine's infrastructure.)
		if _, err := describe.Read(ctx, c, nil, ns, "demo", warn); err != nil || len(warnings) != 3 ||
			!strings.Contains(strings.Join(warnings, "\n"), `cannot get resource "customresourcedefinitions"`) {
			t.Fatalf("describe.Read without discovery: %v, warnings %q; want three CRDs refused", err, warnings)
		}
		warnings = nil
		objs, err := describe.Read(ctx, c, c.RESTMapper(), ns, "demo", warn)
		if err != nil || len(warnings) != 0 || objs.Infrastructure == nil || objs.ControlPlane == nil {
			t.Fatalf("describe.Read with discovery: %v, warnings %q, infrastructure %v, control plane %v", err, warnings, objs.Infrastructure, objs.ControlPlane)
		}
		if gvk := objs.Infrastructure.GroupVersionKind(); gvk != inmemoryv1.GroupVersion.WithKind("InMemoryCluster") {
			t.Errorf("infrastructure read as %v", gvk)
		}
	})

	// Who may not read the provider objects themselves still sees them
	// missing, and why.
	t.Run("viewer who may not read provider objects", func(t *testing.T) {
		viewer := restrictedUser(t, ns, "console-core-only", clusterv1.GroupVersion.Group)
		_, cb := startConsole(t, Options{Config: viewer, StartOnFirstUse: true})
		var detail Detail
		cb.getJSON(clusterPath, http.StatusOK, &detail)
		joined := strings.Join(detail.Warnings, "\n")
		for _, want := range []string{"InMemoryCluster demo", `"console-core-only" cannot get resource "inmemoryclusters"`,
			"KubeadmControlPlane demo-cp", `cannot get resource "kubeadmcontrolplanes"`} {
			if !strings.Contains(joined, want) {
				t.Errorf("warnings %q do not say %q", detail.Warnings, want)
			}
		}
		if n := treeNode(detail.Tree, "InMemoryCluster", "demo"); n == nil || n.Status == nil || n.Status.Reason != clusterv1.ObjectDoesNotExistReason {
			t.Errorf("the infrastructure's row: %+v, want it shown missing", n)
		}
	})

	t.Run("user who may list nothing", func(t *testing.T) {
		nobody := rest.CopyConfig(env.Config)
		nobody.Impersonate = rest.ImpersonationConfig{UserName: "console-nobody"}
		_, nb := startConsole(t, Options{Config: nobody})
		var fleet struct {
			Clusters []ClusterSummary `json:"clusters"`
			Error    string           `json:"error"`
		}
		nb.getJSON("/api/clusters", http.StatusOK, &fleet)
		if len(fleet.Clusters) != 0 || !strings.Contains(fleet.Error, "forbidden") || !strings.Contains(fleet.Error, "console-nobody") {
			t.Errorf("the fleet of a user who may not list Clusters: %d clusters, error %q; want none and the API server's refusal", len(fleet.Clusters), fleet.Error)
		}
	})
}

// treeNode is the row of kind/name in tree, or nil.
func treeNode(tree *describe.Node, kind, name string) *describe.Node {
	if tree == nil {
		return nil
	}
	if tree.Kind == kind && tree.Name == name {
		return tree
	}
	for _, c := range tree.Children {
		if n := treeNode(c, kind, name); n != nil {
			return n
		}
	}
	return nil
}

// restrictedUser is a config that acts as user, who may read Events and
// the objects of groups but neither change them nor read Secrets or CRDs,
// as app teams' read-only roles often are.
func restrictedUser(t *testing.T, ns, user string, groups ...string) *rest.Config {
	t.Helper()
	name := user + "-" + ns
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: []rbacv1.PolicyRule{
		{APIGroups: groups, Resources: []string{"*"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"get", "list", "watch"}},
	}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}
	fixture.Create(t, env.Client, role, binding)
	t.Cleanup(func() {
		_ = env.Client.Delete(context.Background(), binding)
		_ = env.Client.Delete(context.Background(), role)
	})
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	return cfg
}

type sseEvent struct{ name, data string }

// stream opens an SSE stream and delivers its events until the test ends.
func (b *browser) stream(t *testing.T, path string) <-chan sseEvent {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, b.base+path, nil)
	streaming := &http.Client{Jar: b.http.Jar}
	resp, err := streaming.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		cancel()
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	events := make(chan sseEvent, 1000)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(events)
		defer resp.Body.Close()
		r := bufio.NewReaderSize(resp.Body, 1<<20)
		var e sseEvent
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			line = strings.TrimRight(line, "\n")
			switch {
			case line == "":
				if e.name != "" {
					select {
					case events <- e:
					case <-ctx.Done():
						return
					}
				}
				e = sseEvent{}
			case strings.HasPrefix(line, "event: "):
				e.name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				e.data = strings.TrimPrefix(line, "data: ")
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return events
}
