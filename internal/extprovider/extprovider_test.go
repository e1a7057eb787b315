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
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
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
		Lookup:    func(k string) (string, bool) { v, ok := vars[k]; return v, ok },
		APIServer: env.Config,
	}
	res, err := extprovider.Install(ctx, c, o, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	wantSkipped := []string{"Service " + ns + "/webhook-service", "Deployment " + ns + "/controller-manager", "Certificate " + ns + "/serving-cert"}
	if !slices.Equal(res.Skipped, wantSkipped) || len(res.Applied) != 8 || res.Namespace != ns || res.Type != "InfrastructureProvider" {
		t.Errorf("result %+v; want 8 applied, skipped %v, namespace %s", res, wantSkipped, ns)
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

// The manager runs with its own ServiceAccount's kubeconfig, not the
// admin's: the real API server lets it do what the provider's RBAC says
// (widgets, Secrets in its namespace) and refuses Secrets anywhere else.
func TestInstallWritesTheManagersOwnKubeconfig(t *testing.T) {
	ctx := context.Background()
	c := env.Client
	ns := "sa-widgets-" + strings.ToLower(fmt.Sprint(time.Now().UnixNano()%100000))
	vars := map[string]string{"TEST_NAMESPACE": ns}
	o := extprovider.Options{
		Name: "infrastructure-widget", Version: "v1.2.3", Components: "testdata/components.yaml",
		Dir: t.TempDir(), WebhookPort: freePort(t), APIServer: env.Config,
		Lookup: func(k string) (string, bool) { v, ok := vars[k]; return v, ok },
	}
	res, err := extprovider.Install(ctx, c, o, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if res.Kubeconfig != filepath.Join(o.Dir, "kubeconfig") || res.ServiceAccount != ns+"/manager" {
		t.Fatalf("kubeconfig %q for %q; want %s for %s/manager", res.Kubeconfig, res.ServiceAccount, filepath.Join(o.Dir, "kubeconfig"), ns)
	}
	if left := time.Until(res.TokenExpires); left < 300*24*time.Hour || left > extprovider.TokenLifetime+time.Hour {
		t.Errorf("the token expires in %v; want about %v", left, extprovider.TokenLifetime)
	}
	for _, f := range []string{res.Kubeconfig, res.TokenFile} {
		if fi, err := os.Stat(f); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, mode %v; want 0600", f, err, fi)
		}
	}
	raw, _ := os.ReadFile(res.Kubeconfig)
	if strings.Contains(string(raw), "client-key") || strings.Contains(string(raw), "client-certificate") {
		t.Errorf("the provider's kubeconfig carries the admin's credentials:\n%s", raw)
	}

	cfg, err := clientcmd.BuildConfigFromFlags("", res.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	pc, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	other := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: ns + "-not-yours"}, StringData: map[string]string{"k": "v"}}
	if err := c.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(ctx, other) })

	widgets := &unstructured.UnstructuredList{}
	widgets.SetAPIVersion("example.capstan.dev/v1")
	widgets.SetKind("WidgetList")
	if err := pc.List(ctx, widgets); err != nil {
		t.Errorf("the provider may list widgets, its RBAC says: %v", err)
	}
	if err := pc.List(ctx, &corev1.SecretList{}, client.InNamespace(ns)); err != nil {
		t.Errorf("the provider may list Secrets in %s, its RBAC says: %v", ns, err)
	}
	if err := pc.Get(ctx, client.ObjectKeyFromObject(other), &corev1.Secret{}); !apierrors.IsForbidden(err) {
		t.Errorf("reading a Secret in default: %v; want forbidden", err)
	}
	if err := pc.List(ctx, &corev1.SecretList{}); !apierrors.IsForbidden(err) {
		t.Errorf("listing Secrets in every namespace: %v; want forbidden", err)
	}
	if err := pc.List(ctx, &corev1.SecretList{}, client.InNamespace("kube-system")); !apierrors.IsForbidden(err) {
		t.Errorf("listing Secrets in kube-system: %v; want forbidden", err)
	}

	// Components without any ServiceAccount get no kubeconfig (and no
	// fallback to the admin's); two without a Deployment are ambiguous.
	crdOnly := filepath.Join(t.TempDir(), "crd.yaml")
	if err := os.WriteFile(crdOnly, []byte("apiVersion: v1\nkind: Namespace\nmetadata: {name: "+ns+"-bare}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bare := o
	bare.Name, bare.Components, bare.Dir = "infrastructure-bare", crdOnly, t.TempDir()
	if res, err := extprovider.Install(ctx, c, bare, time.Now()); err != nil || res.Kubeconfig != "" {
		t.Errorf("components without a ServiceAccount: kubeconfig %q, %v; want none and no error", res.Kubeconfig, err)
	}
	two := filepath.Join(t.TempDir(), "two.yaml")
	if err := os.WriteFile(two, []byte("apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: a, namespace: x}\n---\napiVersion: v1\nkind: ServiceAccount\nmetadata: {name: b, namespace: x}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bare.Components = two
	if _, err := extprovider.Check(bare); err == nil || !strings.Contains(err.Error(), "serviceAccountName") {
		t.Errorf("two ServiceAccounts and no Deployment: %v; want an error naming serviceAccountName", err)
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
