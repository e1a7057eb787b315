// Package extprovider installs a third-party Cluster API provider (AWS,
// Azure, vSphere, upstream's docker/in-memory provider, ...) into a
// management cluster that has no nodes to run its Deployment: Capstan's
// embedded plane. The provider's manager then runs as a process on this
// host, against the plane's API server.
//
// What a provider ships for clusterctl (its components YAML) assumes a
// cluster with nodes and cert-manager: a Deployment, a Service in front of
// its webhook server, cert-manager Issuers and Certificates, and webhook
// configurations whose CA bundle cert-manager injects. Install keeps what
// the plane can use and replaces the rest:
//
//   - CRDs, namespaces, RBAC and other plain objects are applied as they are,
//     labelled as clusterctl labels a provider's components;
//   - the webhook configurations and CRD conversion webhooks are pointed at
//     https://127.0.0.1:<port>, where the process serves them, with the CA
//     bundle of a certificate authority Capstan makes for the provider;
//   - the Deployment, Services and cert-manager objects are skipped (the
//     process, and the certificate Capstan writes, stand in for them);
//   - the provider is recorded in clusterctl's inventory.
//
// The serving certificate and key are written to the provider's directory,
// for the manager's --webhook-cert-dir, and so is a kubeconfig for the
// provider's own ServiceAccount (the one its Deployment names), so that the
// process has the rights the provider's RBAC gives it and no more.
package extprovider

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilversion "k8s.io/apimachinery/pkg/util/version"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterctlv1 "capstan.dev/capstan/api/clusterctl/v1alpha3"
	"capstan.dev/capstan/internal/atomicfile"
	"capstan.dev/capstan/internal/certs"
	"capstan.dev/capstan/internal/templates"
)

// FieldManager owns what Install applies.
const FieldManager = "capstan-provider"

// Options say which provider to install and how its process is reached.
type Options struct {
	// Name is the provider's clusterctl name, prefixed by its type:
	// infrastructure-aws, bootstrap-talos, control-plane-k0smotron, ...
	Name string
	// Version is the provider's release (v1.2.3), recorded in clusterctl's
	// inventory.
	Version string
	// Components is the provider's components YAML: a file, or a directory
	// whose *.yaml files are read in name order.
	Components string
	// Dir is where the provider's CA, serving certificate and key go.
	Dir string
	// WebhookPort is the loopback port the provider's webhook server
	// listens on.
	WebhookPort int
	// Lookup gives the components' ${VARIABLES}; a variable without a value
	// or a default is an error that names it.
	Lookup func(string) (string, bool)
	// APIServer is how the command reaches the management cluster. Only its
	// address and CA go into the provider's kubeconfig, never its
	// credentials.
	APIServer *rest.Config
}

// Result says what Install did.
type Result struct {
	// Type is the provider's type as clusterctl names it
	// (InfrastructureProvider, ...); Namespace is where it is recorded.
	Type, Namespace string
	// Applied and Skipped list "Kind namespace/name" of the components.
	Applied, Skipped []string
	// CertDir holds tls.crt and tls.key for the webhook server; CAFile the
	// CA that signed them.
	CertDir, CAFile string
	// Kubeconfig is the file the provider's manager runs with: its own
	// ServiceAccount (namespace/name in ServiceAccount), with a token that
	// expires at TokenExpires, read from TokenFile. All are empty when the
	// components name no ServiceAccount for the manager.
	Kubeconfig, TokenFile, ServiceAccount string
	TokenExpires                          time.Time
}

// prefixes map a provider name's prefix to its clusterctl type.
var prefixes = []struct {
	prefix string
	typ    clusterctlv1.ProviderType
}{
	{"infrastructure-", clusterctlv1.InfrastructureProviderType},
	{"bootstrap-", clusterctlv1.BootstrapProviderType},
	{"control-plane-", clusterctlv1.ControlPlaneProviderType},
	{"ipam-", clusterctlv1.IPAMProviderType},
	{"runtime-extension-", clusterctlv1.RuntimeExtensionProviderType},
	{"addon-", clusterctlv1.AddonProviderType},
}

// providerType splits a clusterctl provider name such as infrastructure-aws
// into its type and short name.
func providerType(name string) (clusterctlv1.ProviderType, string, error) {
	for _, p := range prefixes {
		if short, ok := strings.CutPrefix(name, p.prefix); ok && short != "" {
			return p.typ, short, nil
		}
	}
	var want []string
	for _, p := range prefixes {
		want = append(want, p.prefix+"NAME")
	}
	return "", "", fmt.Errorf("provider name %q does not say its type: name it %s, as clusterctl does", name, strings.Join(want, ", "))
}

// skippedKinds run on nodes or come from cert-manager; the process and the
// certificate Install writes stand in for them.
var skippedKinds = []string{"Deployment", "DaemonSet", "StatefulSet", "Service", "Pod"}

const certManagerGroup = "cert-manager.io"

// Check validates the options and reads the components without touching the
// cluster, so that nothing is applied unless all of it can be.
func Check(o Options) ([]*unstructured.Unstructured, error) {
	if _, _, err := providerType(o.Name); err != nil {
		return nil, err
	}
	if _, err := utilversion.ParseSemantic(o.Version); err != nil || !strings.HasPrefix(o.Version, "v") {
		return nil, fmt.Errorf("--version %q is not a release such as v1.2.3: clusterctl reads it from the inventory as a semantic version", o.Version)
	}
	if o.WebhookPort <= 0 || o.WebhookPort > 65535 {
		return nil, fmt.Errorf("--webhook-port %d is not a port", o.WebhookPort)
	}
	objs, err := readComponents(o.Components, o.Lookup)
	if err != nil {
		return nil, err
	}
	if _, _, err := managerServiceAccount(objs); err != nil {
		return nil, err
	}
	return objs, nil
}

// managerServiceAccount is the ServiceAccount the provider's manager runs
// as: the one its Deployment names, else the components' only one. Found is
// false when the components hold neither (CRDs alone, say).
func managerServiceAccount(objs []*unstructured.Unstructured) (key client.ObjectKey, found bool, err error) {
	var accounts []client.ObjectKey
	for _, obj := range objs {
		switch {
		case obj.GetKind() == "Deployment" && obj.GroupVersionKind().Group == "apps":
			name, _, _ := unstructured.NestedString(obj.Object, "spec", "template", "spec", "serviceAccountName")
			if name == "" {
				name = "default"
			}
			return client.ObjectKey{Namespace: obj.GetNamespace(), Name: name}, true, nil
		case obj.GetKind() == "ServiceAccount" && obj.GroupVersionKind().Group == "":
			accounts = append(accounts, client.ObjectKeyFromObject(obj))
		}
	}
	switch len(accounts) {
	case 0:
		return client.ObjectKey{}, false, nil
	case 1:
		return accounts[0], true, nil
	}
	return client.ObjectKey{}, false, fmt.Errorf("--components: %d ServiceAccounts and no Deployment naming the manager's; the manager runs with its own ServiceAccount's rights, so keep its Deployment (spec.template.spec.serviceAccountName) in the components, or only its ServiceAccount", len(accounts))
}

// TokenLifetime is how long the manager's ServiceAccount token is asked to
// live; the API server may shorten it. Running install again issues a new
// one, which the manager reads without a restart (its kubeconfig names the
// token file, and client-go rereads that file).
const TokenLifetime = 365 * 24 * time.Hour

// writeKubeconfig asks the API server for a token of the manager's
// ServiceAccount (TokenRequest: bound to that account, expiring, never
// stored in a Secret) and writes it and a kubeconfig that reads it, both
// 0600, to the provider's directory.
func writeKubeconfig(ctx context.Context, c client.Client, o Options, sa client.ObjectKey, res *Result) error {
	if o.APIServer == nil || o.APIServer.Host == "" {
		return errors.New("no API server address to write the provider's kubeconfig with")
	}
	caData := o.APIServer.CAData
	if len(caData) == 0 && o.APIServer.CAFile != "" {
		b, err := os.ReadFile(o.APIServer.CAFile)
		if err != nil {
			return fmt.Errorf("reading the management cluster's CA for the provider's kubeconfig: %w", err)
		}
		caData = b
	}
	account := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: sa.Namespace, Name: sa.Name}}
	seconds := int64(TokenLifetime / time.Second)
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds}}
	var err error
	for wait := 100 * time.Millisecond; ; wait *= 2 {
		// A ServiceAccount the components do not hold (a Deployment's
		// "default") appears once the plane's controller makes it.
		err = c.SubResource("token").Create(ctx, account, tr)
		if err == nil || wait > 5*time.Second || ctx.Err() != nil || !apierrors.IsNotFound(err) {
			break
		}
		time.Sleep(wait)
	}
	if err != nil {
		return fmt.Errorf("asking for a token of the manager's ServiceAccount %s/%s: %w", sa.Namespace, sa.Name, err)
	}
	res.ServiceAccount = sa.Namespace + "/" + sa.Name
	res.TokenExpires = tr.Status.ExpirationTimestamp.Time
	res.TokenFile = filepath.Join(o.Dir, "token")
	res.Kubeconfig = filepath.Join(o.Dir, "kubeconfig")
	if err := atomicfile.WriteFile(res.TokenFile, []byte(tr.Status.Token), 0o600); err != nil {
		return err
	}
	tokenFile, err := filepath.Abs(res.TokenFile)
	if err != nil {
		return err
	}
	user := "system:serviceaccount:" + sa.Namespace + ":" + sa.Name
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["management"] = &clientcmdapi.Cluster{Server: o.APIServer.Host, CertificateAuthorityData: caData,
		TLSServerName: o.APIServer.ServerName, InsecureSkipTLSVerify: o.APIServer.Insecure}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{TokenFile: tokenFile}
	cfg.Contexts[o.Name] = &clientcmdapi.Context{Cluster: "management", AuthInfo: user, Namespace: sa.Namespace}
	cfg.CurrentContext = o.Name
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(res.Kubeconfig, data, 0o600)
}

// Install applies the provider's components to c as described in the
// package comment, writes its certificate and records it in the inventory.
func Install(ctx context.Context, c client.Client, o Options, now time.Time) (Result, error) {
	objs, err := Check(o)
	if err != nil {
		return Result{}, err
	}
	typ, short, _ := providerType(o.Name)
	res := Result{Type: string(typ), Namespace: o.Name + "-system",
		CertDir: filepath.Join(o.Dir, "certs"), CAFile: filepath.Join(o.Dir, "ca.crt")}
	for _, obj := range objs {
		if obj.GetKind() == "Namespace" {
			res.Namespace = obj.GetName()
			break
		}
	}
	ca, err := ensureCertificates(o.Dir, now)
	if err != nil {
		return res, err
	}
	caPEM := ca.CertPEM()
	base := fmt.Sprintf("https://127.0.0.1:%d", o.WebhookPort)
	if !slices.ContainsFunc(objs, func(obj *unstructured.Unstructured) bool { return obj.GetKind() == "Namespace" }) {
		// The inventory entry lives in the provider's namespace, which
		// components without a Namespace object leave to clusterctl.
		ns := &unstructured.Unstructured{}
		ns.SetAPIVersion("v1")
		ns.SetKind("Namespace")
		ns.SetName(res.Namespace)
		objs = append([]*unstructured.Unstructured{ns}, objs...)
	}
	for _, obj := range objs {
		id := describe(obj)
		if skipped(obj) {
			res.Skipped = append(res.Skipped, id)
			continue
		}
		if err := adapt(obj, o.Name, base, caPEM); err != nil {
			return res, fmt.Errorf("%s: %w", id, err)
		}
		if err := c.Patch(ctx, obj, client.Apply, client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
			return res, fmt.Errorf("applying %s (applied so far: %s; run the command again to finish): %w", id, strings.Join(res.Applied, ", "), err)
		}
		res.Applied = append(res.Applied, id)
	}
	if err := record(ctx, c, res.Namespace, o.Name, short, typ, o.Version); err != nil {
		return res, err
	}
	if sa, found, _ := managerServiceAccount(objs); found {
		if err := writeKubeconfig(ctx, c, o, sa, &res); err != nil {
			return res, err
		}
	}
	return res, nil
}

func describe(obj *unstructured.Unstructured) string {
	if obj.GetNamespace() != "" {
		return obj.GetKind() + " " + obj.GetNamespace() + "/" + obj.GetName()
	}
	return obj.GetKind() + " " + obj.GetName()
}

func skipped(obj *unstructured.Unstructured) bool {
	group := obj.GroupVersionKind().Group
	return group == certManagerGroup || ((group == "" || group == "apps") && slices.Contains(skippedKinds, obj.GetKind()))
}

// adapt labels obj as one of the provider's components and points its
// webhooks at the local process.
func adapt(obj *unstructured.Unstructured, name, base string, caPEM []byte) error {
	labels := obj.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[clusterctlv1.ClusterctlLabel] = ""
	labels[clusterctlv1.ProviderNameLabel] = name
	obj.SetLabels(labels)
	annotations := obj.GetAnnotations()
	delete(annotations, "cert-manager.io/inject-ca-from")
	delete(annotations, "cert-manager.io/inject-ca-from-secret")
	obj.SetAnnotations(annotations)
	obj.SetResourceVersion("")
	obj.SetUID("")
	obj.SetCreationTimestamp(metav1.Time{})
	obj.SetManagedFields(nil)
	unstructured.RemoveNestedField(obj.Object, "status")

	switch obj.GroupVersionKind().GroupKind().String() {
	case "CustomResourceDefinition.apiextensions.k8s.io":
		strategy, _, _ := unstructured.NestedString(obj.Object, "spec", "conversion", "strategy")
		if strategy != "Webhook" {
			return nil
		}
		cfg, found, err := unstructured.NestedMap(obj.Object, "spec", "conversion", "webhook", "clientConfig")
		if err != nil || !found {
			return fmt.Errorf("its conversion webhook has no clientConfig")
		}
		if err := unstructured.SetNestedMap(obj.Object, localClientConfig(cfg, base, "/convert", caPEM), "spec", "conversion", "webhook", "clientConfig"); err != nil {
			return err
		}
	case "MutatingWebhookConfiguration.admissionregistration.k8s.io", "ValidatingWebhookConfiguration.admissionregistration.k8s.io":
		hooks, _, err := unstructured.NestedSlice(obj.Object, "webhooks")
		if err != nil {
			return err
		}
		for i, h := range hooks {
			hook, ok := h.(map[string]any)
			if !ok {
				return fmt.Errorf("webhooks[%d] is not an object", i)
			}
			cfg, _, _ := unstructured.NestedMap(hook, "clientConfig")
			hook["clientConfig"] = localClientConfig(cfg, base, "/", caPEM)
			hooks[i] = hook
		}
		return unstructured.SetNestedSlice(obj.Object, hooks, "webhooks")
	}
	return nil
}

// localClientConfig is a webhook client configuration for the process on
// loopback: the path the Service reference named (or fallback), at base.
func localClientConfig(cfg map[string]any, base, fallback string, caPEM []byte) map[string]any {
	path := fallback
	if svc, ok := cfg["service"].(map[string]any); ok {
		if p, ok := svc["path"].(string); ok && p != "" {
			path = p
		}
	}
	return map[string]any{"url": base + path, "caBundle": base64.StdEncoding.EncodeToString(caPEM)}
}

// readComponents reads the components YAML at path (a file, or a directory
// of *.yaml files), fills in its variables and decodes every document.
func readComponents(path string, lookup func(string) (string, bool)) ([]*unstructured.Unstructured, error) {
	if path == "" {
		return nil, errors.New("no components: pass --components with the provider's components YAML (a file or a directory)")
	}
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("--components: %w", err)
	}
	files := []string{path}
	if info.IsDir() {
		matches, err := filepath.Glob(filepath.Join(path, "*.yaml"))
		if err != nil {
			return nil, err
		}
		slices.Sort(matches)
		if len(matches) == 0 {
			return nil, fmt.Errorf("--components %s: the directory holds no *.yaml file", path)
		}
		files = matches
	}
	if lookup == nil {
		lookup = os.LookupEnv
	}
	var objs []*unstructured.Unstructured
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		text, err := templates.Render(string(raw), lookup)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader([]byte(text)), 4096)
		for {
			obj := &unstructured.Unstructured{}
			if err := dec.Decode(&obj.Object); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			if len(obj.Object) == 0 {
				continue
			}
			if obj.GetKind() == "" || obj.GetAPIVersion() == "" || obj.GetName() == "" {
				return nil, fmt.Errorf("%s: a document without apiVersion, kind or metadata.name", f)
			}
			objs = append(objs, obj)
		}
	}
	if len(objs) == 0 {
		return nil, fmt.Errorf("--components %s: no objects", path)
	}
	return objs, nil
}

// caLifetime and leafLifetime bound the provider's local certificates; the
// leaf is renewed by running install again when it has less than a third of
// its life left.
const (
	caLifetime   = 10 * 365 * 24 * time.Hour
	leafLifetime = 365 * 24 * time.Hour
)

// ensureCertificates makes, or keeps, the provider's CA (dir/ca.crt,
// dir/ca.key) and the webhook server's certificate for 127.0.0.1 and
// localhost (dir/certs/tls.crt, tls.key), keys 0600.
func ensureCertificates(dir string, now time.Time) (*certs.KeyPair, error) {
	caCert, caKey := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key")
	ca, err := certs.Load(caCert, caKey)
	if err != nil {
		if ca, err = certs.NewCA("capstan-provider-webhook-ca", certs.DefaultKeyAlgorithm, now, caLifetime); err != nil {
			return nil, err
		}
		if err := ca.Write(caCert, caKey); err != nil {
			return nil, err
		}
	}
	crt, key := filepath.Join(dir, "certs", "tls.crt"), filepath.Join(dir, "certs", "tls.key")
	if leaf, err := certs.Load(crt, key); err == nil && leaf.Cert.CheckSignatureFrom(ca.Cert) == nil &&
		leaf.Cert.NotAfter.Sub(now) > leafLifetime/3 {
		return ca, nil
	}
	leaf, err := ca.Issue(certs.Request{CommonName: "127.0.0.1", DNSNames: []string{"localhost"},
		IPs: []net.IP{net.ParseIP("127.0.0.1")}, Server: true, Lifetime: leafLifetime}, now)
	if err != nil {
		return nil, err
	}
	return ca, leaf.Write(crt, key)
}

// record writes the provider's entry in clusterctl's inventory, as
// clusterctl init would, and changes nothing when it is already there.
func record(ctx context.Context, c client.Client, namespace, name, short string, typ clusterctlv1.ProviderType, version string) error {
	want := &clusterctlv1.Provider{
		TypeMeta: metav1.TypeMeta{APIVersion: clusterctlv1.GroupVersion.String(), Kind: clusterctlv1.ProviderKind},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{
			clusterctlv1.ClusterctlLabel:     "",
			clusterctlv1.ProviderNameLabel:   name,
			clusterctlv1.ClusterctlCoreLabel: clusterctlv1.ClusterctlCoreInventoryValue,
		}},
		ProviderName: short,
		Type:         string(typ),
		Version:      version,
	}
	if err := c.Patch(ctx, want, client.Apply, client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
		return fmt.Errorf("recording %s in clusterctl's inventory (namespace %s): %w", name, namespace, err)
	}
	return nil
}
