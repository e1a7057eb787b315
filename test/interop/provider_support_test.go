package interop

import (
	"bytes"
	"context"
	"encoding/json"
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

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// The upstream docker provider as the in-memory provider: what the test
// needs to run it as a process against a Capstan plane.

// providerName is the provider label clusterctl gives upstream's docker
// infrastructure provider's CRDs.
const providerName = "infrastructure-docker"

// providerDebugAddr is where the provider's in-memory backend answers
// questions about its simulated workload clusters. Upstream fixes the port
// (19000, every interface) and has no flag for it, so only one such provider
// can run on a host at a time.
const providerDebugAddr = "127.0.0.1:19000"

// installedProvider is what `capstan provider install` set up for the
// provider's manager: its webhook port and serving certificate directory.
type installedProvider struct {
	crds        []string
	webhookPort int
	certDir     string
}

// installProvider installs upstream's docker provider into the plane as a
// user would with the embedded plane: `capstan provider install` with the
// provider's components. The components are made from the CRDs in the
// upstream module the test's go.mod pins, as the provider's release
// kustomization labels them (the contract label that tells Capstan's core
// which contract the kinds follow), without the conversion webhook: each CRD
// keeps only its v1beta2 version, the only one the test uses. All of the
// provider's kinds are installed, Docker* too: its manager watches every one
// of them and does not start without them.
func installProvider(t testing.TB, p *plane) installedProvider {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/cluster-api/test").Output()
	if err != nil {
		t.Fatalf("finding the upstream test module: %v", err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "infrastructure", "docker", "config", "crd", "bases")
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs in %s (%v)", dir, err)
	}
	components := t.TempDir()
	var names []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096).Decode(crd); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		var keep []apiextensionsv1.CustomResourceDefinitionVersion
		for _, v := range crd.Spec.Versions {
			if v.Name == "v1beta2" {
				v.Served, v.Storage = true, true
				keep = append(keep, v)
			}
		}
		if len(keep) != 1 {
			t.Fatalf("%s has no v1beta2 version", f)
		}
		crd.Spec.Versions = keep
		crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter}
		if crd.Labels == nil {
			crd.Labels = map[string]string{}
		}
		crd.Labels["cluster.x-k8s.io/v1beta2"] = "v1beta2"
		crd.APIVersion, crd.Kind = "apiextensions.k8s.io/v1", "CustomResourceDefinition"
		y, err := yaml.Marshal(crd)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(components, filepath.Base(f)), y, 0o644); err != nil {
			t.Fatal(err)
		}
		names = append(names, crd.Name)
	}
	port := freePorts(t, 1)[0]
	res, code := capstan(t, "provider", "install", providerName, "--state-dir", p.dir, "--version", upstream,
		"--components", components, "--webhook-port", strconv.Itoa(port))
	if code != 0 {
		t.Fatalf("capstan provider install exited %d:\n%s", code, res)
	}
	t.Logf("capstan provider install:\n%s", res)
	certDir := filepath.Join(p.dir, "providers", providerName, "certs")
	// The components here are CRDs only, without the provider's
	// ServiceAccount and RBAC, so install writes no kubeconfig for it and the
	// test runs the manager with the plane's own (extprovider's tests cover
	// the ServiceAccount's kubeconfig).
	if want := fmt.Sprintf("--webhook-port %d --webhook-cert-dir %s", port, certDir); !strings.Contains(res, want) {
		t.Fatalf("capstan provider install does not print the manager's flags %q:\n%s", want, res)
	}
	c := p.client()
	ctx := context.Background()
	eventually(t, "the provider's CRDs are established", time.Minute, func() string {
		for _, n := range names {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := c.Get(ctx, client.ObjectKey{Name: n}, crd); err != nil {
				return err.Error()
			}
			established := false
			for _, cond := range crd.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					established = true
				}
			}
			if !established {
				return n + " is not established"
			}
		}
		return ""
	})
	return installedProvider{crds: names, webhookPort: port, certDir: certDir}
}

// provider is the upstream provider process.
type provider struct {
	cmd     *exec.Cmd
	logPath string
	health  string
	exited  chan struct{}
	err     error // how the process ended, once exited is closed
}

// startProvider runs the upstream provider against the plane with the flags
// `capstan provider install` printed (the webhook port and the serving
// certificate it wrote; the plane's admin kubeconfig, since the test's
// components carry no ServiceAccount for the manager), and ports of its own
// for health and diagnostics. Its webhooks
// are not registered: the test sets every field their defaulting would.
// At cleanup the process is stopped; its log is kept in the test's
// temporary directory and its tail printed when the test failed.
func startProvider(t testing.TB, p *plane, in installedProvider) *provider {
	t.Helper()
	if conn, err := net.DialTimeout("tcp", providerDebugAddr, time.Second); err == nil {
		conn.Close()
		t.Fatalf("%s is taken: another upstream in-memory provider runs on this host (its debug port is fixed), and the two would also share the workload ports from 20000", providerDebugAddr)
	}
	dir := t.TempDir()
	ports := freePorts(t, 2)
	pr := &provider{
		logPath: filepath.Join(dir, "provider.log"),
		health:  "127.0.0.1:" + strconv.Itoa(ports[0]),
		exited:  make(chan struct{}),
	}
	logFile, err := os.Create(pr.logPath)
	if err != nil {
		t.Fatal(err)
	}
	pr.cmd = exec.Command(providerBin,
		"--kubeconfig", p.kubeconfig(),
		"--webhook-cert-dir", in.certDir,
		"--webhook-port", strconv.Itoa(in.webhookPort),
		"--health-addr", pr.health,
		"--diagnostics-address", "127.0.0.1:"+strconv.Itoa(ports[1]),
		"--insecure-diagnostics",
	)
	pr.cmd.Env = append(os.Environ(), "POD_IP=127.0.0.1")
	pr.cmd.Stdout, pr.cmd.Stderr = logFile, logFile
	if err := pr.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", providerBin, err)
	}
	go func() {
		pr.err = pr.cmd.Wait()
		logFile.Close()
		close(pr.exited)
	}()
	t.Cleanup(func() {
		pr.stop()
		keepLog(t, "provider.log", pr.log())
		if t.Failed() {
			t.Logf("upstream provider log (%s), last lines:\n%s", pr.logPath, tail(pr.log(), 80))
		}
	})

	deadline := time.Now().Add(2 * time.Minute)
	for {
		select {
		case <-pr.exited:
			t.Fatalf("the upstream provider exited at start-up (%v):\n%s", pr.err, tail(pr.log(), 60))
		default:
		}
		if resp, err := http.Get("http://" + pr.health + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return pr
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the upstream provider is not ready after 2m:\n%s", tail(pr.log(), 60))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func (pr *provider) log() string {
	b, _ := os.ReadFile(pr.logPath)
	return string(b)
}

// running fails the test when the provider has exited.
func (pr *provider) running(t testing.TB) {
	t.Helper()
	select {
	case <-pr.exited:
		t.Fatalf("the upstream provider exited (%v):\n%s", pr.err, tail(pr.log(), 80))
	default:
	}
}

// stop ends the provider: SIGTERM, then SIGKILL if it has not gone in 15s.
func (pr *provider) stop() {
	select {
	case <-pr.exited:
		return
	default:
	}
	_ = pr.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-pr.exited:
	case <-time.After(15 * time.Second):
		_ = pr.cmd.Process.Kill()
		<-pr.exited
	}
}

// simulatedCluster is what the provider's debug endpoint says about one
// workload cluster it simulates.
type simulatedCluster struct {
	Host           string
	Port           int32
	ListenerActive bool
	APIServers     []string
	EtcdMembers    []string
}

// debugGet reads a path of the provider's debug endpoint into out; found is
// false on 404.
func debugGet(path string, out any) (found bool, err error) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + providerDebugAddr + path)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	switch resp.StatusCode {
	case http.StatusOK:
		return true, json.Unmarshal(body, out)
	case http.StatusNotFound:
		return false, nil
	default:
		return false, fmt.Errorf("GET %s: %s: %s", path, resp.Status, body)
	}
}

// simulated returns the provider's view of namespace/name, nil when it
// simulates no such cluster.
func simulated(namespace, name string) (*simulatedCluster, error) {
	sc := &simulatedCluster{}
	found, err := debugGet("/namespaces/"+namespace+"/clusters/"+name, sc)
	if err != nil || !found {
		return nil, err
	}
	return sc, nil
}

// listeners returns the provider's workload cluster listeners by name.
func listeners() (map[string]string, error) {
	l := map[string]string{}
	_, err := debugGet("/listeners", &l)
	return l, err
}

// applyManifest creates every object of a multi-document YAML manifest.
func applyManifest(t testing.TB, c client.Client, manifest string) {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(manifest), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return
			}
			t.Fatalf("decoding the manifest: %v", err)
		}
		if len(u.Object) == 0 {
			continue
		}
		if err := c.Create(context.Background(), u); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("creating %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
}

// keepLog copies a log into $CAPSTAN_INTEROP_LOG_DIR when that is set, so
// that a run that passed can be studied too (the test's own directories go
// with it).
func keepLog(t testing.TB, name, content string) {
	dir := os.Getenv("CAPSTAN_INTEROP_LOG_DIR")
	if dir == "" {
		return
	}
	path := filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "_")+"-"+name)
	err := os.MkdirAll(dir, 0o755)
	if err == nil {
		err = os.WriteFile(path, []byte(content), 0o600)
	}
	if err != nil {
		t.Logf("keeping %s: %v", name, err)
	}
}

// freePorts returns n distinct loopback ports that were free a moment ago.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	var ls []net.Listener
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}
