package interop

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	utilversion "k8s.io/apimachinery/pkg/util/version"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
)

// capstanNamespace is where Capstan runs its providers and records them.
const capstanNamespace = "capstan-system"

// capstanInventory is what `capstan up` records in clusterctl's inventory:
// object name (clusterctl's manifest label) → provider name and type.
var capstanInventory = map[string]struct {
	name string
	typ  clusterctlv1.ProviderType
}{
	"cluster-api":           {"cluster-api", clusterctlv1.CoreProviderType},
	"bootstrap-kubeadm":     {"kubeadm", clusterctlv1.BootstrapProviderType},
	"control-plane-kubeadm": {"kubeadm", clusterctlv1.ControlPlaneProviderType},
	"infrastructure-local":  {"local", clusterctlv1.InfrastructureProviderType},
}

// TestClusterctlRecognisesCapstan drives clusterctl's provider life-cycle
// commands against a plane that `capstan up` started, with local file
// repositories instead of GitHub:
//
//   - the inventory Capstan wrote reads with clusterctl's own Go types;
//   - against upstream's releases (clusterctl's default repositories, here
//     local copies of upstream's metadata) the plan judges Capstan's version
//     by upstream's release series, and refuses a version outside them;
//   - `clusterctl upgrade plan` lists Capstan's four providers at Capstan's
//     version, up to date, then offers a newer release once the repositories
//     hold one;
//   - `clusterctl generate cluster` picks Capstan's local provider and its
//     version from the inventory, and the API server accepts the result;
//   - `clusterctl init --infrastructure docker` takes Capstan as the
//     installed core, bootstrap and control plane: it installs only the
//     docker provider's components (its CRDs, namespace and RBAC) and adds
//     only its entry. clusterctl insists on a working cert-manager API first;
//     the test shows the refusal without one, then satisfies the probe with
//     stand-in cert-manager CRDs (no cert-manager runs);
//   - the plan reads the mixed inventory; Capstan restarting keeps
//     clusterctl's entry; `clusterctl delete` removes only the docker
//     provider.
func TestClusterctlRecognisesCapstan(t *testing.T) {
	p := newPlane(t)
	p.up()
	kc := p.kubeconfig()
	c := inventoryReader(t, p)
	ctx := context.Background()

	// The inventory, read as clusterctl reads it.
	entries := readProviderInventory(t, c)
	current := entries[capstanNamespace+"/cluster-api"].Version
	checkCapstanEntries(t, entries, current)
	if len(entries) != len(capstanInventory) {
		t.Errorf("inventory after capstan up: %v, want only Capstan's %d providers", slices.Sorted(maps.Keys(entries)), len(capstanInventory))
	}
	cur, err := utilversion.ParseSemantic(current)
	if err != nil {
		t.Fatalf("Capstan recorded version %q, which clusterctl cannot parse: %v", current, err)
	}
	t.Logf("Capstan records its providers at %s", current)

	checkUpstreamRepositoryRefusesCapstan(t, kc, cur)

	// Local repositories: Capstan's providers at the version they run, in a
	// release series of the v1beta2 contract.
	repo := fileRepository(t.TempDir())
	series := []clusterctlv1.ReleaseSeries{{Major: int32(cur.Major()), Minor: int32(cur.Minor()), Contract: "v1beta2"}}
	for label := range capstanInventory {
		repo.release(t, label, current, series, nil)
	}
	// An older release of the same series is no upgrade. (For a build
	// between releases, the release it follows: Capstan records such a
	// build as a pre-release of the next patch.)
	if cur.Patch() > 0 {
		older := fmt.Sprintf("v%d.%d.%d", cur.Major(), cur.Minor(), cur.Patch()-1)
		for label := range capstanInventory {
			repo.release(t, label, older, series, nil)
		}
		t.Logf("the repositories also hold the older release %s", older)
	}
	repo.clusterctlConfig(t, slices.Collect(maps.Keys(capstanInventory)), "")

	out := mustClusterctl(t, "upgrade", "plan", "--kubeconfig", kc)
	t.Logf("clusterctl upgrade plan:\n%s", out)
	rows := upgradePlanRows(t, out)
	checkPlan(t, rows, current, "Already up to date")
	if !strings.Contains(out, "You are already up to date!") {
		t.Errorf("clusterctl upgrade plan does not say the installation is up to date:\n%s", out)
	}

	// A newer release in every repository: the plan offers it.
	next := fmt.Sprintf("v%d.%d.0", cur.Major(), cur.Minor()+1)
	series = append(series, clusterctlv1.ReleaseSeries{Major: int32(cur.Major()), Minor: int32(cur.Minor() + 1), Contract: "v1beta2"})
	for label := range capstanInventory {
		repo.release(t, label, next, series, nil)
	}
	out = mustClusterctl(t, "upgrade", "plan", "--kubeconfig", kc)
	t.Logf("clusterctl upgrade plan with %s in the repositories:\n%s", next, out)
	rows = upgradePlanRows(t, out)
	checkPlan(t, rows, current, next)
	if !strings.Contains(out, "clusterctl upgrade apply --contract v1beta2") {
		t.Errorf("clusterctl upgrade plan does not offer the upgrade:\n%s", out)
	}

	// clusterctl generate cluster takes the infrastructure provider and its
	// version from the inventory when not told: Capstan's local provider at
	// the version it runs. Its template (Capstan's built-in one) is in that
	// release only, not in the newer one. The API server accepts what
	// clusterctl generated (a server-side dry run).
	tmpl, err := os.ReadFile(filepath.Join("..", "..", "internal", "templates", "local", "default.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	repo.file(t, "infrastructure-local", current, "cluster-template.yaml", tmpl)
	generated := filepath.Join(t.TempDir(), "cluster.yaml")
	mustClusterctl(t, "generate", "cluster", "inventory-demo", "--kubeconfig", kc, "--kubernetes-version", "v1.35.8",
		"--worker-machine-count", "1", "--target-namespace", "default", "--write-to", generated)
	kinds := dryRunCreate(t, c, generated)
	for _, want := range []string{"Cluster", "LocalCluster", "KubeadmControlPlane", "MachineDeployment"} {
		if !slices.Contains(kinds, want) {
			t.Errorf("clusterctl generate cluster made %v, no %s", kinds, want)
		}
	}

	// The docker provider's repository, at the upstream release.
	upstreamV := utilversion.MustParseSemantic(upstream)
	repo.release(t, "infrastructure-docker", upstream,
		[]clusterctlv1.ReleaseSeries{{Major: int32(upstreamV.Major()), Minor: int32(upstreamV.Minor()), Contract: "v1beta2"}},
		dockerComponents(t))
	labels := append(slices.Collect(maps.Keys(capstanInventory)), "infrastructure-docker")

	// Without cert-manager clusterctl refuses to install anything, after it
	// has validated the installation it would make. The cert-manager
	// configuration says it is provisioned outside clusterctl, so that
	// clusterctl probes for it instead of downloading it.
	repo.clusterctlConfig(t, labels, "cert-manager:\n  externallyProvisioned: \"true\"\n  timeout: 15s\n")
	before := readProviderInventory(t, c)
	out, code := clusterctl(t, "init", "--infrastructure", "docker", "--kubeconfig", kc)
	t.Logf("clusterctl init --infrastructure docker without cert-manager exited %d:\n%s", code, out)
	if code == 0 {
		t.Fatalf("clusterctl init installed a provider without cert-manager:\n%s", out)
	}
	if strings.Contains(out, "Installing") {
		t.Errorf("clusterctl init without cert-manager installed something:\n%s", out)
	}
	checkInventoryUnchanged(t, before, readProviderInventory(t, c))

	// Stand-in cert-manager CRDs answer clusterctl's probe (it creates an
	// Issuer and a Certificate, then deletes them); nothing acts on them.
	installCertManagerStandIn(t, p)
	out = mustClusterctl(t, "init", "--infrastructure", "docker", "--kubeconfig", kc)
	t.Logf("clusterctl init --infrastructure docker:\n%s", out)
	installing := installedProviders(out)
	if !slices.Equal(installing, []string{"infrastructure-docker"}) {
		t.Errorf("clusterctl init installed %v, want only infrastructure-docker:\n%s", installing, out)
	}
	after := readProviderInventory(t, c)
	checkInventoryUnchanged(t, before, after)
	docker, ok := after["capd-system/infrastructure-docker"]
	if !ok {
		t.Fatalf("clusterctl init recorded no infrastructure-docker entry: %v", slices.Sorted(maps.Keys(after)))
	}
	if docker.ProviderName != "docker" || docker.Type != string(clusterctlv1.InfrastructureProviderType) || docker.Version != upstream {
		t.Errorf("clusterctl's entry for the docker provider: %+v", docker)
	}
	if len(after) != len(capstanInventory)+1 {
		t.Errorf("inventory after clusterctl init: %v, want Capstan's providers and infrastructure-docker", slices.Sorted(maps.Keys(after)))
	}
	checkDockerComponents(t, p)

	// The plan reads the mixed inventory.
	out = mustClusterctl(t, "upgrade", "plan", "--kubeconfig", kc)
	t.Logf("clusterctl upgrade plan after init:\n%s", out)
	rows = upgradePlanRows(t, out)
	if r, ok := rows["capd-system/infrastructure-docker"]; !ok || r.current != upstream || r.next != "Already up to date" {
		t.Errorf("clusterctl upgrade plan row of the docker provider: %+v (present %v)", r, ok)
	}
	delete(rows, "capd-system/infrastructure-docker")
	checkPlan(t, rows, current, next)

	// Capstan restarting rewrites its own entries only.
	if out, code := capstan(t, "down", "--state-dir", p.dir); code != 0 {
		t.Fatalf("capstan down exited %d:\n%s", code, out)
	}
	p.up()
	c = inventoryReader(t, p)
	restarted := readProviderInventory(t, c)
	checkCapstanEntries(t, restarted, current)
	if d, ok := restarted["capd-system/infrastructure-docker"]; !ok || d.ResourceVersion != docker.ResourceVersion {
		t.Errorf("after capstan down and up, clusterctl's docker entry is %+v (present %v), want it untouched", d, ok)
	}
	out = mustClusterctl(t, "upgrade", "plan", "--kubeconfig", kc)
	if rows := upgradePlanRows(t, out); len(rows) != len(capstanInventory)+1 {
		t.Errorf("clusterctl upgrade plan after capstan restarted lists %d providers:\n%s", len(rows), out)
	}

	// clusterctl deletes what it installed and leaves Capstan's providers.
	out = mustClusterctl(t, "delete", "--infrastructure", "docker", "--include-crd", "--kubeconfig", kc)
	t.Logf("clusterctl delete --infrastructure docker --include-crd:\n%s", out)
	final := readProviderInventory(t, c)
	if _, ok := final["capd-system/infrastructure-docker"]; ok {
		t.Error("clusterctl delete left the docker provider's inventory entry")
	}
	delete(restarted, "capd-system/infrastructure-docker")
	checkInventoryUnchanged(t, restarted, final)
	if len(final) != len(capstanInventory) {
		t.Errorf("inventory after clusterctl delete: %v, want Capstan's providers", slices.Sorted(maps.Keys(final)))
	}
	eventually(t, "the docker provider's CRDs are gone", time.Minute, func() string {
		return checkDockerComponentsGone(ctx, p)
	})
	for _, n := range []string{"clusters.cluster.x-k8s.io", "localclusters.infrastructure.cluster.x-k8s.io", "kubeadmcontrolplanes.controlplane.cluster.x-k8s.io"} {
		if err := c.Get(ctx, client.ObjectKey{Name: n}, &apiextensionsv1.CustomResourceDefinition{}); err != nil {
			t.Errorf("after clusterctl delete of the docker provider, Capstan's CRD %s: %v", n, err)
		}
	}
}

// fileRepository is a directory of clusterctl local repositories, laid out
// as clusterctl reads a file:// provider URL:
// <dir>/<manifest label>/<version>/{metadata.yaml,components.yaml}.
type fileRepository string

// release writes one release of a provider: its metadata (the release
// series and their contracts) and, when given, its components.
func (r fileRepository) release(t testing.TB, label, version string, series []clusterctlv1.ReleaseSeries, components []byte) {
	t.Helper()
	md := clusterctlv1.Metadata{
		TypeMeta:      metav1.TypeMeta{APIVersion: clusterctlv1.GroupVersion.String(), Kind: "Metadata"},
		ReleaseSeries: series,
	}
	b, err := yaml.Marshal(md)
	if err != nil {
		t.Fatal(err)
	}
	r.releaseFiles(t, label, version, b, components)
}

// releaseFiles writes one release of a provider from its metadata.yaml and,
// when given, its components.yaml.
func (r fileRepository) releaseFiles(t testing.TB, label, version string, metadata, components []byte) {
	t.Helper()
	dir := filepath.Join(string(r), label, version)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "metadata.yaml"), metadata, 0o644); err != nil {
		t.Fatal(err)
	}
	if components != nil {
		if err := os.WriteFile(filepath.Join(dir, "components.yaml"), components, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// file writes another file of a provider's release.
func (r fileRepository) file(t testing.TB, label, version, name string, content []byte) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(string(r), label, version, name), content, 0o644); err != nil {
		t.Fatal(err)
	}
}

// dryRunCreate creates the objects of a YAML file with a server-side dry
// run and returns their kinds.
func dryRunCreate(t testing.TB, c client.Client, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	for {
		o := &unstructured.Unstructured{}
		if err := dec.Decode(&o.Object); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatalf("%s: %v", path, err)
		}
		if len(o.Object) == 0 {
			continue
		}
		if err := c.Create(context.Background(), o, client.DryRunAll); err != nil {
			t.Errorf("the API server refuses %s %s from clusterctl generate cluster: %v", o.GetKind(), o.GetName(), err)
		}
		kinds = append(kinds, o.GetKind())
	}
	return kinds
}

// clusterctlConfig writes the test's clusterctl.yaml: a provider entry per
// label, each pointing at the newest release of its local repository (the
// URL names components.yaml, which clusterctl reads only to install), and
// extra configuration verbatim.
func (r fileRepository) clusterctlConfig(t testing.TB, labels []string, extra string) {
	t.Helper()
	slices.Sort(labels)
	var b strings.Builder
	b.WriteString("providers:\n")
	for _, label := range labels {
		name, typ := label, clusterctlv1.InfrastructureProviderType
		if e, ok := capstanInventory[label]; ok {
			name, typ = e.name, e.typ
		} else {
			name = strings.TrimPrefix(label, "infrastructure-")
		}
		fmt.Fprintf(&b, "- name: %s\n  type: %s\n  url: file://%s\n", name, typ, filepath.Join(string(r), label, "latest", "components.yaml"))
	}
	b.WriteString(extra)
	path := filepath.Join(configHome(t), "cluster-api", "clusterctl.yaml")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// checkUpstreamRepositoryRefusesCapstan runs clusterctl upgrade plan as it
// runs with no configuration, where the core provider's repository is
// upstream Cluster API's releases on GitHub. There is no network here, so a
// local repository stands in for each of upstream's three providers,
// holding upstream's release at the version go.mod pins with the
// metadata.yaml of that release (from the module); the local provider's
// repository is Capstan's. Capstan's core is named cluster-api, as
// clusterctl requires of a core provider, so clusterctl compares Capstan's
// version with upstream's release series: a version in none of them is
// refused, and one inside them is read as implementing that series'
// contract.
func checkUpstreamRepositoryRefusesCapstan(t testing.TB, kubeconfig string, current *utilversion.Version) {
	t.Helper()
	dir, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/cluster-api").Output()
	if err != nil {
		t.Fatalf("finding the upstream module: %v", err)
	}
	metadata, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(dir)), "metadata.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	md := &clusterctlv1.Metadata{}
	if err := yaml.Unmarshal(metadata, md); err != nil {
		t.Fatalf("upstream's metadata.yaml: %v", err)
	}
	repo := fileRepository(t.TempDir())
	for _, label := range []string{"cluster-api", "bootstrap-kubeadm", "control-plane-kubeadm"} {
		repo.releaseFiles(t, label, upstream, metadata, nil)
	}
	repo.release(t, "infrastructure-local", "v"+current.String(),
		[]clusterctlv1.ReleaseSeries{{Major: int32(current.Major()), Minor: int32(current.Minor()), Contract: "v1beta2"}}, nil)
	repo.clusterctlConfig(t, slices.Collect(maps.Keys(capstanInventory)), "")
	out, code := clusterctl(t, "upgrade", "plan", "--kubeconfig", kubeconfig)
	t.Logf("clusterctl upgrade plan against upstream's cluster-api releases exited %d:\n%s", code, out)
	if rs := md.GetReleaseSeriesForVersion(current); rs != nil {
		// clusterctl then takes upstream's word for the contract Capstan's
		// providers implement.
		want := fmt.Sprintf("Latest release available for the %s Cluster API contract version", rs.Contract)
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("clusterctl upgrade plan against upstream's releases, with Capstan at %s in upstream's %d.%d series, exited %d without %q:\n%s",
				current, rs.Major, rs.Minor, code, want, out)
		}
		t.Logf("with upstream's repositories clusterctl reads Capstan v%s as upstream's %d.%d series, contract %s", current, rs.Major, rs.Minor, rs.Contract)
		return
	}
	want := fmt.Sprintf("version v%s (the current version) for the provider %s/cluster-api does not match any release series", current, capstanNamespace)
	if code == 0 || !strings.Contains(out, want) {
		t.Errorf("clusterctl upgrade plan against upstream's releases exited %d without %q:\n%s", code, want, out)
	}
}

// inventoryReader is a client of the plane that knows clusterctl's
// inventory types from clusterctl's own Go package.
func inventoryReader(t testing.TB, p *plane) client.Client {
	t.Helper()
	s := kruntime.NewScheme()
	for _, add := range []func(*kruntime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, clusterctlv1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	c, err := client.New(p.restConfig(), client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// readProviderInventory lists clusterctl's inventory in every namespace, by
// namespace/name.
func readProviderInventory(t testing.TB, c client.Client) map[string]clusterctlv1.Provider {
	t.Helper()
	list := &clusterctlv1.ProviderList{}
	if err := c.List(context.Background(), list); err != nil {
		t.Fatalf("reading clusterctl's inventory with clusterctl's types: %v", err)
	}
	out := map[string]clusterctlv1.Provider{}
	for _, p := range list.Items {
		out[p.Namespace+"/"+p.Name] = p
	}
	return out
}

// checkCapstanEntries checks Capstan's four entries as clusterctl would have
// written them on install.
func checkCapstanEntries(t testing.TB, entries map[string]clusterctlv1.Provider, version string) {
	t.Helper()
	for label, want := range capstanInventory {
		p, ok := entries[capstanNamespace+"/"+label]
		if !ok {
			t.Errorf("no inventory entry %s/%s (have %v)", capstanNamespace, label, slices.Sorted(maps.Keys(entries)))
			continue
		}
		if p.ProviderName != want.name || p.GetProviderType() != want.typ || p.Version != version || p.WatchedNamespace != "" {
			t.Errorf("inventory entry %s: providerName %q type %q version %q watchedNamespace %q, want %q %q %q \"\"",
				label, p.ProviderName, p.Type, p.Version, p.WatchedNamespace, want.name, want.typ, version)
		}
		if p.ManifestLabel() != label || p.InstanceName() != capstanNamespace+"/"+label {
			t.Errorf("inventory entry %s: clusterctl calls it %s (instance %s)", label, p.ManifestLabel(), p.InstanceName())
		}
		for k, v := range map[string]string{
			clusterctlv1.ClusterctlLabel:     "",
			clusterctlv1.ClusterctlCoreLabel: clusterctlv1.ClusterctlCoreLabelInventoryValue,
			"cluster.x-k8s.io/provider":      label,
		} {
			if got, ok := p.Labels[k]; !ok || got != v {
				t.Errorf("inventory entry %s: label %s=%q (present %v), want %q", label, k, got, ok, v)
			}
		}
	}
}

// checkInventoryUnchanged fails when an entry of before was changed or
// removed in after.
func checkInventoryUnchanged(t testing.TB, before, after map[string]clusterctlv1.Provider) {
	t.Helper()
	for key, b := range before {
		a, ok := after[key]
		switch {
		case !ok:
			t.Errorf("inventory entry %s was removed", key)
		case a.ResourceVersion != b.ResourceVersion:
			t.Errorf("inventory entry %s was rewritten: %+v, was %+v", key, a, b)
		}
	}
}

// planRow is one provider row of `clusterctl upgrade plan`.
type planRow struct {
	typ, current, next string
}

// upgradePlanRows reads the provider rows of clusterctl upgrade plan's
// tables (NAME NAMESPACE TYPE CURRENT VERSION NEXT VERSION), by
// namespace/name.
func upgradePlanRows(t testing.TB, out string) map[string]planRow {
	t.Helper()
	rows := map[string]planRow{}
	inTable := false
	for _, line := range strings.Split(out, "\n") {
		fields := strings.Fields(line)
		switch {
		case len(fields) > 0 && fields[0] == "NAME":
			inTable = true
		case len(fields) == 0:
			inTable = false
		case inTable && len(fields) >= 5:
			rows[fields[1]+"/"+fields[0]] = planRow{typ: fields[2], current: fields[3], next: strings.Join(fields[4:], " ")}
		}
	}
	if len(rows) == 0 {
		t.Fatalf("clusterctl upgrade plan printed no provider rows:\n%s", out)
	}
	return rows
}

// checkPlan checks that the plan lists exactly Capstan's providers, each at
// current and with next as its next version.
func checkPlan(t testing.TB, rows map[string]planRow, current, next string) {
	t.Helper()
	if len(rows) != len(capstanInventory) {
		t.Errorf("clusterctl upgrade plan lists %v, want Capstan's %d providers", slices.Sorted(maps.Keys(rows)), len(capstanInventory))
	}
	for label, want := range capstanInventory {
		r, ok := rows[capstanNamespace+"/"+label]
		if !ok {
			t.Errorf("clusterctl upgrade plan has no row for %s/%s", capstanNamespace, label)
			continue
		}
		if r.typ != string(want.typ) || r.current != current || r.next != next {
			t.Errorf("clusterctl upgrade plan row %s: %+v, want type %s current %s next %q", label, r, want.typ, current, next)
		}
	}
}

// installedProviders are the providers clusterctl init says it installs.
func installedProviders(out string) []string {
	var got []string
	for _, line := range strings.Split(out, "\n") {
		_, rest, ok := strings.Cut(line, `Installing provider="`)
		if !ok {
			continue
		}
		if name, _, ok := strings.Cut(rest, `"`); ok {
			got = append(got, name)
		}
	}
	return got
}

// dockerComponents is a components.yaml of upstream's docker provider as
// the test can install it: its namespace, its CRDs from the upstream module
// go.mod pins (each reduced to its v1beta2 version, since no conversion
// webhook runs here, and labelled for the v1beta2 contract as its
// kustomization labels them), a service account and the RBAC its manager
// would run with. There is no Deployment: the embedded plane has no nodes to
// run one on, and clusterctl init does not wait for it unless told to.
func dockerComponents(t testing.TB) []byte {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/cluster-api/test").Output()
	if err != nil {
		t.Fatalf("finding the upstream test module: %v", err)
	}
	files, err := filepath.Glob(filepath.Join(strings.TrimSpace(string(out)), "infrastructure", "docker", "config", "crd", "bases", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no docker provider CRDs found (%v)", err)
	}
	docs := []string{`apiVersion: v1
kind: Namespace
metadata:
  name: capd-system
`, `apiVersion: v1
kind: ServiceAccount
metadata:
  name: capd-manager
  namespace: capd-system
`, `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: capd-manager-role
rules:
- apiGroups: ["infrastructure.cluster.x-k8s.io"]
  resources: ["*"]
  verbs: ["get", "list", "watch", "create", "update", "patch", "delete"]
- apiGroups: ["cluster.x-k8s.io"]
  resources: ["clusters", "clusters/status", "machines", "machines/status", "machinepools", "machinepools/status"]
  verbs: ["get", "list", "watch"]
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get", "list", "watch"]
`, `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: capd-manager-rolebinding
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: capd-manager-role
subjects:
- kind: ServiceAccount
  name: capd-manager
  namespace: capd-system
`}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096).Decode(crd); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		crd.Spec.Versions = slices.DeleteFunc(crd.Spec.Versions, func(v apiextensionsv1.CustomResourceDefinitionVersion) bool { return v.Name != "v1beta2" })
		if len(crd.Spec.Versions) != 1 {
			t.Fatalf("%s has no v1beta2 version", f)
		}
		crd.Spec.Versions[0].Served, crd.Spec.Versions[0].Storage = true, true
		crd.Labels = map[string]string{"cluster.x-k8s.io/v1beta2": "v1beta2"}
		crd.APIVersion, crd.Kind = "apiextensions.k8s.io/v1", "CustomResourceDefinition"
		y, err := yaml.Marshal(crd)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, string(y))
	}
	return []byte(strings.Join(docs, "---\n"))
}

// checkDockerComponents checks what clusterctl init created of the docker
// provider: its CRDs carry clusterctl's provider labels and the contract
// label, its namespaced objects are in its namespace.
func checkDockerComponents(t testing.TB, p *plane) {
	t.Helper()
	c := inventoryReader(t, p)
	ctx := context.Background()
	crds := &apiextensionsv1.CustomResourceDefinitionList{}
	if err := c.List(ctx, crds, client.MatchingLabels{"cluster.x-k8s.io/provider": "infrastructure-docker"}); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, crd := range crds.Items {
		names = append(names, crd.Name)
		if crd.Labels["cluster.x-k8s.io/v1beta2"] != "v1beta2" {
			t.Errorf("CRD %s lacks the v1beta2 contract label: %v", crd.Name, crd.Labels)
		}
		if _, ok := crd.Labels[clusterctlv1.ClusterctlLabel]; !ok {
			t.Errorf("CRD %s lacks clusterctl's label: %v", crd.Name, crd.Labels)
		}
	}
	for _, n := range []string{"devclusters.infrastructure.cluster.x-k8s.io", "devmachines.infrastructure.cluster.x-k8s.io", "dockermachinetemplates.infrastructure.cluster.x-k8s.io"} {
		if !slices.Contains(names, n) {
			t.Errorf("clusterctl init did not install CRD %s (installed %v)", n, names)
		}
	}
	for _, o := range []client.Object{
		&metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}, ObjectMeta: metav1.ObjectMeta{Name: "capd-system"}},
		&metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"}, ObjectMeta: metav1.ObjectMeta{Namespace: "capd-system", Name: "capd-manager"}},
		&metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"}, ObjectMeta: metav1.ObjectMeta{Name: "capd-manager-rolebinding"}},
	} {
		key := client.ObjectKeyFromObject(o)
		if err := c.Get(ctx, key, o); err != nil {
			t.Errorf("clusterctl init did not create %s %s: %v", o.GetObjectKind().GroupVersionKind().Kind, key, err)
			continue
		}
		if o.GetLabels()["cluster.x-k8s.io/provider"] != "infrastructure-docker" {
			t.Errorf("%s %s lacks clusterctl's provider label: %v", o.GetObjectKind().GroupVersionKind().Kind, key, o.GetLabels())
		}
	}
}

// checkDockerComponentsGone says which of the docker provider's CRDs are
// still there after clusterctl delete --include-crd.
func checkDockerComponentsGone(ctx context.Context, p *plane) string {
	c := inventoryReader(p.t, p)
	crds := &apiextensionsv1.CustomResourceDefinitionList{}
	if err := c.List(ctx, crds, client.MatchingLabels{"cluster.x-k8s.io/provider": "infrastructure-docker"}); err != nil {
		return err.Error()
	}
	if len(crds.Items) > 0 {
		return fmt.Sprintf("%d CRDs remain, %s among them", len(crds.Items), crds.Items[0].Name)
	}
	return ""
}

// installCertManagerStandIn installs the two cert-manager.io/v1 kinds
// clusterctl init probes for (Issuer, Certificate), with no schema and no
// controller: enough for clusterctl to create and delete its test objects,
// nothing that issues a certificate.
func installCertManagerStandIn(t testing.TB, p *plane) {
	t.Helper()
	c := inventoryReader(t, p)
	ctx := context.Background()
	preserve := true
	for _, kind := range []string{"Issuer", "Certificate"} {
		plural := strings.ToLower(kind) + "s"
		crd := &apiextensionsv1.CustomResourceDefinition{
			ObjectMeta: metav1.ObjectMeta{Name: plural + ".cert-manager.io"},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{
				Group: "cert-manager.io",
				Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: kind, ListKind: kind + "List", Plural: plural, Singular: strings.ToLower(kind)},
				Scope: apiextensionsv1.NamespaceScoped,
				Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
					Name: "v1", Served: true, Storage: true,
					Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
						Type: "object", XPreserveUnknownFields: &preserve,
					}},
				}},
			},
		}
		if err := c.Create(ctx, crd); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("installing stand-in CRD %s: %v", crd.Name, err)
		}
	}
	eventually(t, "the stand-in cert-manager CRDs are established", time.Minute, func() string {
		for _, n := range []string{"issuers.cert-manager.io", "certificates.cert-manager.io"} {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := c.Get(ctx, client.ObjectKey{Name: n}, crd); err != nil {
				return err.Error()
			}
			if !slices.ContainsFunc(crd.Status.Conditions, func(cond apiextensionsv1.CustomResourceDefinitionCondition) bool {
				return cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue
			}) {
				return n + " is not established"
			}
		}
		return ""
	})
}
