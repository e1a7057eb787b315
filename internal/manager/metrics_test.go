package manager_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"capstan.dev/capstan/internal/deploy"
	"capstan.dev/capstan/internal/manager"
	"capstan.dev/capstan/test/fixture"
)

// externalIP is an address of this host other than loopback, or "" when it
// has none.
func externalIP() string {
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			return n.IP.String()
		}
	}
	return ""
}

// get requests url with an optional bearer token; the status is 0 when no
// HTTP answer came (refused, or not TLS where TLS is spoken).
func get(url, token string) (int, string) {
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the server's certificate is self-signed by design
	}}
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := c.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(body)
}

func startManager(t *testing.T, o manager.Options) {
	t.Helper()
	fixture.SetLogger()
	env := manager.Plane()
	o.AllowRestartInProcess = true
	mgr, err := manager.New(env.Config, o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// The manager's defaults keep its endpoints on loopback, where they answer
// plain HTTP; nothing listens on the host's other addresses.
func TestDefaultEndpointsListenOnLoopbackOnly(t *testing.T) {
	for _, addr := range []string{manager.DefaultMetricsAddr, manager.DefaultProbeAddr} {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatal(err)
		}
		if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
			t.Errorf("default address %q is not loopback", addr)
		}
	}
	// The defaults' hosts with free ports, since another manager on this
	// machine may hold the default ports.
	metrics, probes := fixture.FreePort(t), fixture.FreePort(t)
	withPort := func(addr string, port int) string {
		host, _, _ := net.SplitHostPort(addr)
		return net.JoinHostPort(host, strconv.Itoa(port))
	}
	startManager(t, manager.Options{MetricsAddr: withPort(manager.DefaultMetricsAddr, metrics), ProbeAddr: withPort(manager.DefaultProbeAddr, probes)})
	fixture.Eventually(t, "probes and metrics answer on loopback", time.Minute, func(context.Context) string {
		if code, body := get(fmt.Sprintf("http://127.0.0.1:%d/healthz", probes), ""); code != http.StatusOK {
			return fmt.Sprintf("healthz: %d %s", code, body)
		}
		code, body := get(fmt.Sprintf("http://127.0.0.1:%d/metrics", metrics), "")
		return fixture.Unless(code == http.StatusOK, fmt.Sprintf("metrics: %d %s", code, body))
	})
	ip := externalIP()
	if ip == "" {
		t.Log("this host has no address but loopback; the check from outside is skipped")
		return
	}
	for _, port := range []int{metrics, probes} {
		if c, err := net.DialTimeout("tcp", net.JoinHostPort(ip, strconv.Itoa(port)), 2*time.Second); err == nil {
			c.Close()
			t.Errorf("port %d answers on %s: it should listen on loopback only", port, ip)
		}
	}
}

// Metrics exposed beyond loopback are HTTPS, refuse anonymous callers and
// callers without the metrics reader role, and answer a caller the API
// server authenticates and allows GET /metrics.
func TestExposedMetricsRequireAuthorisation(t *testing.T) {
	env := manager.Plane()
	ctx := context.Background()
	ns := env.Namespace(t)
	port := fixture.FreePort(t)
	startManager(t, manager.Options{MetricsAddr: "0.0.0.0:" + strconv.Itoa(port), ProbeAddr: "0"})

	cs := kubernetes.NewForConfigOrDie(env.Config)
	token := func(sa string) string {
		t.Helper()
		fixture.Create(t, env.Client, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: ns}})
		tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(600))}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	// The reader role as the installation ships it.
	objs, err := deploy.Objects(deploy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var reader *rbacv1.ClusterRole
	for _, o := range objs {
		if r, ok := o.(*rbacv1.ClusterRole); ok && r.Name == deploy.MetricsReaderRole {
			reader = r
		}
	}
	if reader == nil {
		t.Fatalf("the installation has no ClusterRole %s", deploy.MetricsReaderRole)
	}
	if err := env.Client.Patch(ctx, reader, client.Apply, client.FieldOwner("test"), client.ForceOwnership); err != nil {
		t.Fatal(err)
	}
	scraper, stranger := token("scraper"), token("stranger")
	fixture.Create(t, env.Client, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-scraper"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: deploy.MetricsReaderRole},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "scraper", Namespace: ns}},
	})
	t.Cleanup(func() {
		_ = env.Client.Delete(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: ns + "-scraper"}})
	})

	url := fmt.Sprintf("https://127.0.0.1:%d/metrics", port)
	fixture.Eventually(t, "metrics answer the scraper", time.Minute, func(context.Context) string {
		code, body := get(url, scraper)
		return fixture.Unless(code == http.StatusOK && strings.Contains(body, "controller_runtime"), fmt.Sprintf("%d %.200s", code, body))
	})
	if code, body := get(url, ""); code != http.StatusUnauthorized {
		t.Errorf("anonymous request: got %d %.200s, want 401", code, body)
	}
	// controller-runtime's filter reports a token the API server rejects
	// as a failed authentication (500), not as 401: either way, no metrics.
	if code, body := get(url, "not-a-token"); code == http.StatusOK {
		t.Errorf("request with a bogus token answered %d: %.200s", code, body)
	}
	if code, body := get(url, stranger); code != http.StatusForbidden {
		t.Errorf("request of an account without the reader role: got %d %.200s, want 403", code, body)
	}
	if code, body := get(fmt.Sprintf("http://127.0.0.1:%d/metrics", port), ""); code == http.StatusOK {
		t.Errorf("plain HTTP answered %d: exposed metrics must be HTTPS only (%.200s)", code, body)
	}
}
