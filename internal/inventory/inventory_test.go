package inventory_test

import (
	"context"
	"maps"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilversion "k8s.io/apimachinery/pkg/util/version"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterctlv1 "capstan.dev/capstan/api/clusterctl/v1alpha3"
	"capstan.dev/capstan/internal/deploy"
	"capstan.dev/capstan/internal/inventory"
	"capstan.dev/capstan/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

// Every version written parses as clusterctl parses it.
func TestVersion(t *testing.T) {
	for in, want := range map[string]string{
		"dev":                     inventory.DevVersion,
		"":                        inventory.DevVersion,
		"44d1588-dirty":           inventory.DevVersion,
		"v1.2":                    inventory.DevVersion,
		"v1.2.3":                  "v1.2.3",
		"1.2.3":                   "v1.2.3",
		"v1.2.3-dirty":            "v1.2.3+dirty",
		"v0.3.0-5-g44d1588":       "v0.3.1-dev.5+g44d1588",
		"v0.3.0-5-g44d1588-dirty": "v0.3.1-dev.5+g44d1588.dirty",
		"v0.4.0-rc.1-12-gdeadbee": "v0.4.0-rc.1.dev.12+gdeadbee",
		"v2.0.0-rc.1+build.7":     "v2.0.0-rc.1+build.7",
		"v2.0.0+build.7-dirty":    "v2.0.0+build.7.dirty",
		"v1.x-3-g44d1588":         inventory.DevVersion,
	} {
		got := inventory.Version(in)
		if got != want {
			t.Errorf("Version(%q) = %q, want %q", in, got, want)
		}
		if _, err := utilversion.ParseSemantic(got); err != nil {
			t.Errorf("Version(%q) = %q, which clusterctl cannot parse: %v", in, got, err)
		}
	}
	dev, _ := utilversion.ParseSemantic(inventory.DevVersion)
	if release, _ := utilversion.ParseSemantic("v0.0.1"); !dev.LessThan(release) {
		t.Errorf("%s does not sort below every release", inventory.DevVersion)
	}
}

// A build's inventory version sorts, by the rules clusterctl compares with,
// after the tag git describe started from and before the next release, so
// clusterctl upgrade plan offers no older release as an upgrade.
func TestVersionOrder(t *testing.T) {
	for _, tc := range []struct{ after, build, before string }{
		{"v0.3.0", "v0.3.0-5-g44d1588", "v0.3.1"},
		{"v0.3.0", "v0.3.0-5-g44d1588-dirty", "v0.3.1-rc.1"},
		{"v0.3.1-dev.4+gaaaaaaa", "v0.3.0-5-g44d1588", "v0.3.1-dev.6+gbbbbbbb"},
		{"v0.3.1-dev.9+gaaaaaaa", "v0.3.0-10-g44d1588", "v0.3.1-dev.11+gbbbbbbb"},
		{"v0.4.0-rc.1", "v0.4.0-rc.1-12-gdeadbee", "v0.4.0-rc.2"},
		{"v0.2.9", "v0.3.0-dirty", "v0.3.1"},
	} {
		after := utilversion.MustParseSemantic(tc.after)
		build := utilversion.MustParseSemantic(inventory.Version(tc.build))
		before := utilversion.MustParseSemantic(tc.before)
		if !after.LessThan(build) || !build.LessThan(before) {
			t.Errorf("Version(%q) = %s, want it after %s and before %s", tc.build, build, after, before)
		}
	}
	// At the tag with uncommitted changes: neither older nor newer than the tag.
	tag := utilversion.MustParseSemantic("v0.3.0")
	dirty := utilversion.MustParseSemantic(inventory.Version("v0.3.0-dirty"))
	if tag.LessThan(dirty) || dirty.LessThan(tag) {
		t.Errorf("Version(v0.3.0-dirty) = %s orders apart from v0.3.0", dirty)
	}
}

// providers reads the inventory of a namespace, by object name.
func providers(t *testing.T, ns string) map[string]clusterctlv1.Provider {
	t.Helper()
	list := &clusterctlv1.ProviderList{}
	if err := env.Client.List(context.Background(), list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	out := map[string]clusterctlv1.Provider{}
	for _, p := range list.Items {
		out[p.Name] = p
	}
	return out
}

// checkEntry checks one entry as clusterctl would write it.
func checkEntry(t *testing.T, got map[string]clusterctlv1.Provider, name, providerName string, typ clusterctlv1.ProviderType, version string) {
	t.Helper()
	p, ok := got[name]
	if !ok {
		t.Errorf("no Provider %s (have %v)", name, slices.Sorted(maps.Keys(got)))
		return
	}
	if p.ProviderName != providerName || p.Type != string(typ) || p.Version != version || p.WatchedNamespace != "" {
		t.Errorf("Provider %s: providerName %q type %q version %q watchedNamespace %q; want %q %q %q \"\"",
			name, p.ProviderName, p.Type, p.Version, p.WatchedNamespace, providerName, typ, version)
	}
	for k, v := range map[string]string{
		clusterctlv1.ClusterctlLabel:     "",
		clusterctlv1.ProviderNameLabel:   name,
		clusterctlv1.ClusterctlCoreLabel: "inventory",
	} {
		if got, ok := p.Labels[k]; !ok || got != v {
			t.Errorf("Provider %s: label %s=%q (present %v), want %q", name, k, got, ok, v)
		}
	}
}

// The plane the test harness started is `capstan up`: it recorded the core,
// kubeadm and local providers in capstan-system at the binary's version.
func TestThePlaneRecordsItsProviders(t *testing.T) {
	out, err := exec.Command(env.Binary, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	fields := strings.Fields(string(out))
	if len(fields) < 2 {
		t.Fatalf("capstan version printed %q", out)
	}
	want := inventory.Version(fields[1])
	got := providers(t, deploy.Namespace)
	if len(got) != 4 {
		t.Errorf("providers in %s: %v, want 4", deploy.Namespace, slices.Sorted(maps.Keys(got)))
	}
	checkEntry(t, got, "cluster-api", "cluster-api", clusterctlv1.CoreProviderType, want)
	checkEntry(t, got, "bootstrap-kubeadm", "kubeadm", clusterctlv1.BootstrapProviderType, want)
	checkEntry(t, got, "control-plane-kubeadm", "kubeadm", clusterctlv1.ControlPlaneProviderType, want)
	checkEntry(t, got, "infrastructure-local", "local", clusterctlv1.InfrastructureProviderType, want)
}

// Ensure writes what is missing or different and nothing else: a second run
// makes no write; a new version updates the entries; a provider no longer
// run is removed; a label someone else added and another provider's entry
// stay; a field or label changed behind Capstan's back is put back.
func TestEnsure(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	in := inventory.Installed{Namespace: ns, Version: "v1.2.0", Local: true, InMemory: true}
	res, err := inventory.Ensure(ctx, env.Client, in, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Created) != 5 || len(res.Updated)+len(res.Deleted) != 0 {
		t.Errorf("first Ensure = %+v, want 5 created", res)
	}
	got := providers(t, ns)
	checkEntry(t, got, "cluster-api", "cluster-api", clusterctlv1.CoreProviderType, "v1.2.0")
	checkEntry(t, got, "infrastructure-inmemory", "inmemory", clusterctlv1.InfrastructureProviderType, "v1.2.0")
	before := map[string]string{}
	for name, p := range got {
		before[name] = p.ResourceVersion
	}

	res, err = inventory.Ensure(ctx, env.Client, in, 10*time.Second)
	if err != nil || res.Changed() {
		t.Fatalf("second Ensure = %+v, %v; want nothing written", res, err)
	}
	for name, p := range providers(t, ns) {
		if p.ResourceVersion != before[name] {
			t.Errorf("Provider %s was written by an Ensure that had nothing to change", name)
		}
	}

	// Someone else's label on an entry, and another provider's entry.
	patch := client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"labels":{"example.com/team":"platform"}}}`))
	core := got["cluster-api"]
	if err := env.Client.Patch(ctx, &core, patch); err != nil {
		t.Fatal(err)
	}
	aws := &clusterctlv1.Provider{ProviderName: "aws", Type: string(clusterctlv1.InfrastructureProviderType), Version: "v2.8.0"}
	aws.Namespace, aws.Name = ns, "infrastructure-aws"
	if err := env.Client.Create(ctx, aws); err != nil {
		t.Fatal(err)
	}

	in.Version, in.InMemory = "v1.3.0", false
	res, err = inventory.Ensure(ctx, env.Client, in, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Created) != 0 || len(res.Updated) != 4 || !slices.Equal(res.Deleted, []string{"infrastructure-inmemory"}) {
		t.Errorf("Ensure at v1.3.0 without inmemory = %+v, want 4 updated and infrastructure-inmemory deleted", res)
	}
	got = providers(t, ns)
	checkEntry(t, got, "cluster-api", "cluster-api", clusterctlv1.CoreProviderType, "v1.3.0")
	checkEntry(t, got, "bootstrap-kubeadm", "kubeadm", clusterctlv1.BootstrapProviderType, "v1.3.0")
	checkEntry(t, got, "control-plane-kubeadm", "kubeadm", clusterctlv1.ControlPlaneProviderType, "v1.3.0")
	checkEntry(t, got, "infrastructure-local", "local", clusterctlv1.InfrastructureProviderType, "v1.3.0")
	if _, ok := got["infrastructure-inmemory"]; ok {
		t.Error("infrastructure-inmemory is still recorded")
	}
	if got["cluster-api"].Labels["example.com/team"] != "platform" {
		t.Errorf("someone else's label was dropped: %v", got["cluster-api"].Labels)
	}
	if a, ok := got["infrastructure-aws"]; !ok || a.Version != "v2.8.0" || a.ResourceVersion != aws.ResourceVersion {
		t.Errorf("another provider's entry was touched: %+v", a)
	}

	// Changed behind Capstan's back, as an old clusterctl might.
	core = got["cluster-api"]
	patch = client.RawPatch("application/merge-patch+json",
		[]byte(`{"metadata":{"labels":{"clusterctl.cluster.x-k8s.io":null}},"watchedNamespace":"team-a","version":"v1.1.0"}`))
	if err := env.Client.Patch(ctx, &core, patch); err != nil {
		t.Fatal(err)
	}
	res, err = inventory.Ensure(ctx, env.Client, in, 10*time.Second)
	if err != nil || !slices.Equal(res.Updated, []string{"cluster-api"}) || len(res.Created)+len(res.Deleted) != 0 {
		t.Fatalf("Ensure after a change behind its back = %+v, %v; want cluster-api updated", res, err)
	}
	checkEntry(t, providers(t, ns), "cluster-api", "cluster-api", clusterctlv1.CoreProviderType, "v1.3.0")
}

// Ensure creates the namespace when there is none (the embedded plane's
// first start).
func TestEnsureCreatesTheNamespace(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t) + "-new"
	in := inventory.Installed{Namespace: ns, Version: "dev"}
	t.Cleanup(func() {
		_ = env.Client.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})
	res, err := inventory.Ensure(ctx, env.Client, in, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Created, []string{"cluster-api", "bootstrap-kubeadm", "control-plane-kubeadm"}) {
		t.Errorf("Ensure = %+v, want the core and kubeadm providers created", res)
	}
	checkEntry(t, providers(t, ns), "control-plane-kubeadm", "kubeadm", clusterctlv1.ControlPlaneProviderType, inventory.DevVersion)
}
