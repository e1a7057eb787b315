package extprovider_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterctlv1 "capstan.dev/capstan/api/clusterctl/v1alpha3"
	"capstan.dev/capstan/internal/extprovider"
	"capstan.dev/capstan/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// A provider's components go in as the plane can use them, and the webhook
// they declare reaches a server on loopback that uses the certificate
// Install wrote: the real API server calls it and enforces its answer.
func TestInstallPointsWebhooksAtTheLocalProcess(t *testing.T) {
	ctx := context.Background()
	c := env.Client
	ns := "widgets-" + strings.ToLower(fmt.Sprint(time.Now().UnixNano()%100000))
	vars := map[string]string{"TEST_NAMESPACE": ns}
	o := extprovider.Options{
		Name: "infrastructure-widget", Version: "v1.2.3", Components: "testdata/components.yaml",
		Dir: t.TempDir(), WebhookPort: freePort(t),
		Lookup: func(k string) (string, bool) { v, ok := vars[k]; return v, ok },
	}
	res, err := extprovider.Install(ctx, c, o, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	wantSkipped := []string{"Service " + ns + "/webhook-service", "Deployment " + ns + "/controller-manager", "Certificate " + ns + "/serving-cert"}
	if !slices.Equal(res.Skipped, wantSkipped) || len(res.Applied) != 4 || res.Namespace != ns || res.Type != "InfrastructureProvider" {
		t.Errorf("result %+v; want 4 applied, skipped %v, namespace %s", res, wantSkipped, ns)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "controller-manager"}, &appsv1.Deployment{}); !apierrors.IsNotFound(err) {
		t.Errorf("the Deployment was applied: %v", err)
	}

	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.Get(ctx, client.ObjectKey{Name: "widgets.example.capstan.dev"}, crd); err != nil {
		t.Fatal(err)
	}
	base := fmt.Sprintf("https://127.0.0.1:%d", o.WebhookPort)
	conv := crd.Spec.Conversion.Webhook.ClientConfig
	if conv.URL == nil || *conv.URL != base+"/convert" || conv.Service != nil || len(conv.CABundle) == 0 {
		t.Errorf("conversion webhook %+v; want %s/convert with a CA bundle", conv, base)
	}
	if crd.Labels[clusterctlv1.ClusterctlLabel] != "" || crd.Labels[clusterctlv1.ProviderNameLabel] != "infrastructure-widget" {
		t.Errorf("CRD labels %v", crd.Labels)
	}
	if _, ok := crd.Annotations["cert-manager.io/inject-ca-from"]; ok {
		t.Error("the cert-manager annotation was kept")
	}
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := c.Get(ctx, client.ObjectKey{Name: ns + "-validating"}, vwc); err != nil {
		t.Fatal(err)
	}
	if u := vwc.Webhooks[0].ClientConfig.URL; u == nil || *u != base+"/validate-widget" {
		t.Errorf("webhook URL %v, want %s/validate-widget", u, base)
	}

	p := &clusterctlv1.Provider{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "infrastructure-widget"}, p); err != nil {
		t.Fatal(err)
	}
	if p.ProviderName != "widget" || p.Type != "InfrastructureProvider" || p.Version != "v1.2.3" || p.Labels[clusterctlv1.ClusterctlCoreLabel] != clusterctlv1.ClusterctlCoreInventoryValue {
		t.Errorf("inventory entry %+v", p)
	}

	// The certificate is for loopback, signed by the CA in the bundle, with
	// its key private.
	if fi, err := os.Stat(filepath.Join(res.CertDir, "tls.key")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("tls.key: %v, mode %v", err, fi)
	}
	serving, err := tls.LoadX509KeyPair(filepath.Join(res.CertDir, "tls.crt"), filepath.Join(res.CertDir, "tls.key"))
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", o.WebhookPort))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(denyWidgets), TLSConfig: &tls.Config{Certificates: []tls.Certificate{serving}}}
	go func() { _ = srv.ServeTLS(l, "", "") }()
	t.Cleanup(func() { _ = srv.Close() })

	widget := &unstructured.Unstructured{}
	widget.SetAPIVersion("example.capstan.dev/v1")
	widget.SetKind("Widget")
	widget.SetNamespace(ns)
	widget.SetName("w")
	var createErr error
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if createErr = c.Create(ctx, widget.DeepCopy()); createErr != nil && strings.Contains(createErr.Error(), "widgets are refused by the local webhook") {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if createErr == nil || !strings.Contains(createErr.Error(), "widgets are refused by the local webhook") {
		t.Errorf("creating a Widget: %v; want the local webhook's refusal", createErr)
	}

	// Again: the same objects, the same certificate.
	before, _ := os.ReadFile(filepath.Join(res.CertDir, "tls.crt"))
	if _, err := extprovider.Install(ctx, c, o, time.Now()); err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadFile(filepath.Join(res.CertDir, "tls.crt"))
	if string(before) != string(after) {
		t.Error("a second install replaced a certificate that was still good")
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(crd.Spec.Conversion.Webhook.ClientConfig.CABundle)
	leaf, _ := x509.ParseCertificate(serving.Certificate[0])
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "127.0.0.1"}); err != nil {
		t.Errorf("the serving certificate does not verify against the CA bundle: %v", err)
	}
}

// denyWidgets answers every admission review with a refusal.
func denyWidgets(w http.ResponseWriter, r *http.Request) {
	review := &admissionv1.AdmissionReview{}
	if err := json.NewDecoder(r.Body).Decode(review); err != nil || review.Request == nil {
		http.Error(w, "not an admission review", http.StatusBadRequest)
		return
	}
	review.Response = &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: false,
		Result: &metav1.Status{Message: "widgets are refused by the local webhook"}}
	review.Request = nil
	_ = json.NewEncoder(w).Encode(review)
}

func TestBadInputIsRefusedBeforeAnyWrite(t *testing.T) {
	good := extprovider.Options{Name: "infrastructure-widget", Version: "v1.2.3", Components: "testdata/components.yaml", WebhookPort: 9443,
		Lookup: func(k string) (string, bool) { return "x", k == "TEST_NAMESPACE" }}
	for _, c := range []struct {
		name   string
		change func(*extprovider.Options)
		want   string
	}{
		{"name without type", func(o *extprovider.Options) { o.Name = "widget" }, "infrastructure-NAME"},
		{"version", func(o *extprovider.Options) { o.Version = "1.2" }, "--version"},
		{"port", func(o *extprovider.Options) { o.WebhookPort = 0 }, "--webhook-port"},
		{"no components", func(o *extprovider.Options) { o.Components = "" }, "--components"},
		{"missing variable", func(o *extprovider.Options) { o.Lookup = func(string) (string, bool) { return "", false } }, "TEST_NAMESPACE"},
	} {
		o := good
		c.change(&o)
		if _, err := extprovider.Check(o); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want an error naming %s", c.name, err, c.want)
		}
	}
	if _, err := extprovider.Check(good); err != nil {
		t.Errorf("good options refused: %v", err)
	}
}
