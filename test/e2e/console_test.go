package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

var consoleURL = regexp.MustCompile(`http://127\.0\.0\.1:[0-9]+/#token=[0-9a-f]+`)

// signIn does what the console's page does with the URL it was opened at:
// it posts the token of the URL's fragment to /api/login. It returns the
// API's base address and a client holding the session cookie.
func signIn(t *testing.T, url string) (string, *http.Client) {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 30 * time.Second}
	base, token, _ := strings.Cut(url, "/#token=")
	resp, err := c.Post(base+"/api/login", "application/json", strings.NewReader(`{"token":"`+token+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("signing in with %s: %d", url, resp.StatusCode)
	}
	return base, c
}

func getJSON(t *testing.T, c *http.Client, url string, into any) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, body)
	}
	if err := json.Unmarshal(body, into); err != nil {
		t.Fatalf("GET %s: %v in %s", url, err, body)
	}
}

// TestConsoleUI drives `capstan ui` against the shared plane, and checks
// that `capstan up` and `capstan status` print the plane's own console.
func TestConsoleUI(t *testing.T) {
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "console-ui"}}
	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "shown"},
		Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{
			APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "LocalCluster", Name: "shown"}}}
	if err := env.Client.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), ns) })
	if err := env.Client.Create(ctx, cluster); err != nil {
		t.Fatal(err)
	}

	t.Run("ui", func(t *testing.T) {
		cmd := exec.Command(env.Binary, "ui", "--kubeconfig", filepath.Join(env.StateDir, "kubeconfig"), "--port", "0")
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		defer func() {
			_ = cmd.Process.Kill()
		}()
		urls := make(chan string, 1)
		go func() {
			scanner := bufio.NewScanner(stdout)
			for scanner.Scan() {
				if url := consoleURL.FindString(scanner.Text()); url != "" {
					urls <- url
				}
			}
			exited <- cmd.Wait()
		}()
		var url string
		select {
		case url = <-urls:
		case err := <-exited:
			t.Fatalf("capstan ui exited before printing its URL: %v", err)
		case <-time.After(time.Minute):
			t.Fatal("capstan ui printed no URL within a minute")
		}
		base, c := signIn(t, url)
		var session map[string]string
		getJSON(t, c, base+"/api/session", &session)
		if session["server"] != env.Config.Host || session["csrfToken"] == "" {
			t.Errorf("session %v, want server %s and a CSRF token", session, env.Config.Host)
		}
		var fleet struct {
			Clusters []struct{ Namespace, Name string } `json:"clusters"`
		}
		getJSON(t, c, base+"/api/clusters", &fleet)
		found := false
		for _, s := range fleet.Clusters {
			found = found || (s.Namespace == ns.Name && s.Name == "shown")
		}
		if !found {
			t.Errorf("the fleet lacks %s/shown: %+v", ns.Name, fleet.Clusters)
		}
		_ = cmd.Process.Signal(syscall.SIGINT)
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("capstan ui after Ctrl-C: %v, want a clean exit", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("capstan ui did not stop within 30s of Ctrl-C")
		}
	})

	t.Run("up and status", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		p := newPlane(t)
		out, code := capstan(t, "up", "--state-dir", p.dir, "--controllers=false", "--ui-port", strconv.Itoa(port))
		if code != 0 {
			t.Fatalf("capstan up exited %d:\n%s\nlog:\n%s", code, out, p.log())
		}
		url := consoleURL.FindString(out)
		if !strings.Contains(url, ":"+strconv.Itoa(port)+"/") {
			t.Fatalf("up does not print the console on port %d:\n%s", port, out)
		}
		if _, status := p.running(); !strings.Contains(status, "console:    "+url) {
			t.Errorf("status does not show the console %s:\n%s", url, status)
		}
		base, c := signIn(t, url)
		var session map[string]string
		getJSON(t, c, base+"/api/session", &session)
		if session["csrfToken"] == "" {
			t.Errorf("the plane's console session: %v", session)
		}
		// The URL signed in once; status shows the next one.
		if _, status := p.running(); strings.Contains(status, url) || !consoleURL.MatchString(status) {
			t.Errorf("after signing in, status still shows the used URL %s, or none:\n%s", url, status)
		}
		// The plane's console starts watching when first asked.
		var fleet struct {
			Clusters []struct{ Namespace, Name string } `json:"clusters"`
			Error    string                             `json:"error"`
		}
		getJSON(t, c, base+"/api/clusters", &fleet)
		if fleet.Error != "" || fleet.Clusters == nil {
			t.Errorf("the plane's console fleet: %+v", fleet)
		}
		p.down()
	})
}
