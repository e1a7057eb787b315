package agent

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/cluster-bootstrap/token/jws"
	kubeadmapi "k8s.io/kubernetes/cmd/kubeadm/app/apis/kubeadm"

	"capstan.dev/capstan/internal/certs"
	"capstan.dev/capstan/internal/providers/local/machinedir"
)

func machineDir(t *testing.T, bootstrap string) string {
	t.Helper()
	dir := t.TempDir()
	mj := `{"namespace":"default","cluster":"c1","machine":"m1","hostname":"m1","providerID":"local://default/m1","version":"v1.34.2"}`
	if err := os.WriteFile(filepath.Join(dir, machinedir.MachineFile), []byte(mj), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, machinedir.BootstrapDataFile), []byte(bootstrap), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

func readStatus(t *testing.T, dir string) machinedir.Status {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, machinedir.StatusFile))
	if err != nil {
		t.Fatal(err)
	}
	var s machinedir.Status
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestRunWithoutKubeadmRunsUntilStopped(t *testing.T) {
	dir := machineDir(t, "## template: jinja\n#cloud-config\nwrite_files:\n- path: /etc/hostname-copy\n  content: '{{ ds.meta_data.local_hostname }}'\nruncmd:\n- apt-get install -y jq\n- echo booted > /run/booted\n")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, Options{Dir: dir, Log: logr.Discard()}) }()

	deadline := time.Now().Add(10 * time.Second)
	for readStatusMaybe(dir).Phase != machinedir.PhaseRunning {
		if time.Now().After(deadline) {
			t.Fatalf("not Running: %+v", readStatusMaybe(dir))
		}
		time.Sleep(20 * time.Millisecond)
	}
	s := readStatus(t, dir)
	if s.PID != os.Getpid() || s.Bootstrap == nil || !s.Bootstrap.Complete {
		t.Errorf("status = %+v", s)
	}
	if len(s.Bootstrap.Skipped) != 1 || !strings.Contains(s.Bootstrap.Skipped[0], "runcmd[0]") || !strings.Contains(s.Bootstrap.Skipped[0], "apt-get") {
		t.Errorf("skipped = %v", s.Bootstrap.Skipped)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, machinedir.RootFS, "etc/hostname-copy")); string(b) != "m1" {
		t.Errorf("templated file = %q", b)
	}
	// The lock is held: a second run is refused.
	err := Run(context.Background(), Options{Dir: dir, Log: logr.Discard()})
	if !errors.Is(err, ErrLocked) {
		t.Errorf("second run: %v, want ErrLocked", err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run after stop = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	// Released: the lock can be taken again.
	lk, err := takeLock(dir)
	if err != nil {
		t.Fatalf("lock not released: %v", err)
	}
	lk.Release()
}

func readStatusMaybe(dir string) machinedir.Status {
	b, _ := os.ReadFile(filepath.Join(dir, machinedir.StatusFile))
	var s machinedir.Status
	_ = json.Unmarshal(b, &s)
	return s
}

func TestRunFailedBootstrapReportsFailed(t *testing.T) {
	dir := machineDir(t, "#cloud-config\nruncmd:\n- kubeadm join --config /run/kubeadm/missing.yaml\n- echo never > /run/never\n")
	err := Run(context.Background(), Options{Dir: dir, Log: logr.Discard()})
	if err == nil || !strings.Contains(err.Error(), "runcmd[0]: run kubeadm") {
		t.Fatalf("Run = %v", err)
	}
	s := readStatus(t, dir)
	if s.Phase != machinedir.PhaseFailed || !strings.Contains(s.Message, "runcmd[0]") || s.Bootstrap == nil || !strings.Contains(s.Bootstrap.Failed, "runcmd[0]") {
		t.Errorf("status = %+v", s)
	}
	if _, err := os.Stat(filepath.Join(dir, machinedir.RootFS, "run/never")); !os.IsNotExist(err) {
		t.Errorf("a command after the failure ran: %v", err)
	}
}

// A failed command's text may carry a secret: what the machine reports (and
// the LocalMachine's conditions show) names the step and its program only;
// the error is in the machine's log, without the command's arguments.
func TestFailedCommandTextStaysOutOfTheStatus(t *testing.T) {
	const secret = "s3cr3t-token-value"
	dir := machineDir(t, "#cloud-config\nwrite_files:\n- path: /etc/blocker\n  content: x\nruncmd:\n- [sh, -c, 'curl -H \"Authorization: Bearer "+secret+"\" https://example.invalid']\n- echo "+secret+" > /etc/blocker/x\n")
	var logged strings.Builder
	log := funcr.New(func(prefix, args string) { logged.WriteString(prefix + " " + args + "\n") }, funcr.Options{})
	err := Run(context.Background(), Options{Dir: dir, Log: log})
	if err == nil {
		t.Fatal("Run succeeded; want the echo into a file under a file to fail")
	}
	s := readStatus(t, dir)
	if s.Bootstrap == nil {
		t.Fatalf("status without bootstrap: %+v", s)
	}
	if len(s.Bootstrap.Skipped) != 1 || !strings.HasPrefix(s.Bootstrap.Skipped[0], "runcmd[0]: run sh (arguments not shown)") {
		t.Errorf("skipped %q; want runcmd[0], sh without its arguments", s.Bootstrap.Skipped)
	}
	reported := strings.Join(append([]string{err.Error(), s.Message, s.Bootstrap.Failed}, s.Bootstrap.Skipped...), "\n")
	if strings.Contains(reported, secret) {
		t.Errorf("the machine reports a command's text:\n%s", reported)
	}
	if want := "runcmd[1]: run echo (arguments not shown) failed"; !strings.HasPrefix(s.Bootstrap.Failed, want) || !strings.Contains(s.Message, want) {
		t.Errorf("failed %q, message %q; want both to start with %q", s.Bootstrap.Failed, s.Message, want)
	}
	if strings.Contains(logged.String(), secret) {
		t.Errorf("the machine's log holds the command's text:\n%s", logged.String())
	}
	if !strings.Contains(logged.String(), "Bootstrap step failed") || !strings.Contains(logged.String(), "not a directory") {
		t.Errorf("the machine's log does not say why the step failed:\n%s", logged.String())
	}
}

func TestRunRequiresMachineJSON(t *testing.T) {
	err := Run(context.Background(), Options{Dir: t.TempDir(), Log: logr.Discard()})
	if err == nil || !strings.Contains(err.Error(), "machine.json") {
		t.Fatalf("Run = %v", err)
	}
}

// clusterInfoServer serves kube-public/cluster-info over TLS with a serving
// certificate from ca, as a workload cluster's API server would.
// signers maps token IDs to the secrets cluster-info is signed with.
func clusterInfoServer(t *testing.T, ca *certs.KeyPair, signers map[string]string) string {
	t.Helper()
	serving, err := ca.Issue(certs.Request{CommonName: "kube-apiserver", IPs: []net.IP{net.ParseIP("127.0.0.1")}, Server: true}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(nil)
	kc := clientcmdapi.NewConfig()
	kc.Clusters[""] = &clientcmdapi.Cluster{Server: "https://" + srv.Listener.Addr().String(), CertificateAuthorityData: ca.CertPEM()}
	kcYAML, err := clientcmd.Write(*kc)
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/namespaces/kube-public/configmaps/cluster-info" || r.Header.Get("Authorization") != "" {
			http.Error(w, "forbidden", http.StatusForbidden)
			return
		}
		cm := corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: metav1.ObjectMeta{Name: "cluster-info", Namespace: "kube-public"},
			Data: map[string]string{"kubeconfig": string(kcYAML)}}
		for id, secret := range signers {
			sig, err := jws.ComputeDetachedSignature(string(kcYAML), id, secret)
			if err != nil {
				t.Error(err)
			}
			cm.Data["jws-kubeconfig-"+id] = sig
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(cm)
	})
	key, _ := serving.KeyPEM()
	pair, err := tls.X509KeyPair(serving.CertPEM(), key)
	if err != nil {
		t.Fatal(err)
	}
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

func TestDiscoverChecksTheCAPin(t *testing.T) {
	now := time.Now()
	ca, _ := certs.NewCA("kubernetes", certs.DefaultKeyAlgorithm, now, time.Hour)
	other, _ := certs.NewCA("kubernetes", certs.DefaultKeyAlgorithm, now, time.Hour)
	endpoint := clusterInfoServer(t, ca, map[string]string{"abcdef": "0123456789abcdef", "other0": "0123456789abcdef"})
	a := &agent{log: logr.Discard()}
	token := "abcdef.0123456789abcdef"
	disc := func(pins []string, unsafe bool) kubeadmapi.Discovery {
		return kubeadmapi.Discovery{
			BootstrapToken: &kubeadmapi.BootstrapTokenDiscovery{APIServerEndpoint: endpoint, Token: token, CACertHashes: pins, UnsafeSkipCAVerification: unsafe},
			Timeout:        &metav1.Duration{Duration: 2 * time.Second},
		}
	}
	ctx := context.Background()

	caPEM, server, err := a.discover(ctx, disc([]string{certs.PublicKeyPin(other.Cert), strings.ToUpper(certs.PublicKeyPin(ca.Cert)[7:])}, false))
	if err == nil {
		t.Fatal("a pin without the sha256: prefix matched")
	}
	caPEM, server, err = a.discover(ctx, disc([]string{certs.PublicKeyPin(other.Cert), certs.PublicKeyPin(ca.Cert)}, false))
	if err != nil {
		t.Fatal(err)
	}
	if string(caPEM) != string(ca.CertPEM()) || server != "https://"+endpoint {
		t.Errorf("discovered CA/server = %q %q", caPEM, server)
	}

	start := time.Now()
	_, _, err = a.discover(ctx, disc([]string{certs.PublicKeyPin(other.Cert)}, false))
	if err == nil || !strings.Contains(err.Error(), "caCertHashes") {
		t.Fatalf("wrong pin: %v", err)
	}
	if time.Since(start) > 3*time.Second {
		t.Errorf("a pin mismatch was retried instead of refused at once (%s)", time.Since(start))
	}
	if _, _, err := a.discover(ctx, disc(nil, true)); err != nil {
		t.Errorf("unsafeSkipCAVerification: %v", err)
	}
	if _, _, err := a.discover(ctx, disc(nil, false)); err == nil || !strings.Contains(err.Error(), "caCertHashes") {
		t.Errorf("no pins and no unsafe skip: %v", err)
	}

	// cluster-info must be signed with the token: a server that does not
	// know it is not trusted, even with a matching pin.
	token = "other0.fedcba9876543210"
	if _, _, err := a.discover(ctx, disc([]string{certs.PublicKeyPin(ca.Cert)}, false)); err == nil || !strings.Contains(err.Error(), "does not verify") {
		t.Errorf("wrong token secret: %v", err)
	}
	token = "nosig0.0123456789abcdef"
	if _, _, err := a.discover(ctx, disc(nil, true)); err == nil || !strings.Contains(err.Error(), "not signed for bootstrap token nosig0") {
		t.Errorf("unsigned cluster-info: %v", err)
	}
	token = "no-dot"
	if _, _, err := a.discover(ctx, disc(nil, true)); err == nil || !strings.Contains(err.Error(), "<id>.<secret>") {
		t.Errorf("malformed token: %v", err)
	}
}
