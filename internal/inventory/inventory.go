// Package inventory records the providers Capstan runs in clusterctl's
// provider inventory (Provider objects of clusterctl.cluster.x-k8s.io/
// v1alpha3), so that upstream clusterctl recognises a Capstan management
// cluster: `clusterctl upgrade plan` reads the versions, `clusterctl move`
// requires the source's providers in the target, `clusterctl init` skips
// what is installed. `capstan up`, `capstan init` and `capstan upgrade
// apply` call Ensure.
//
// The objects are written as clusterctl writes them: named by the
// provider's manifest label (cluster-api, bootstrap-kubeadm, ...), in the
// namespace the provider runs in, labelled clusterctl.cluster.x-k8s.io="",
// cluster.x-k8s.io/provider=<name> and clusterctl.cluster.x-k8s.io/core=
// inventory. Ensure reads once and writes only what differs: running it
// again over an unchanged installation makes no write.
package inventory

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilversion "k8s.io/apimachinery/pkg/util/version"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterctlv1 "capstan.dev/capstan/api/clusterctl/v1alpha3"
	"capstan.dev/capstan/internal/patch"
)

// CRDName is the name of clusterctl's inventory CRD.
const CRDName = "providers.clusterctl.cluster.x-k8s.io"

// DevVersion is what a build whose version is not a semantic version (an
// unbuilt "dev", or a bare commit from git describe) records: clusterctl
// refuses to move from a cluster whose inventory holds a version it cannot
// parse, and a pre-release of v0.0.0 sorts below every release, so
// clusterctl offers any real release as an upgrade.
const DevVersion = "v0.0.0-dev"

// Version is the inventory version of a Capstan build version, ordered as
// clusterctl orders versions (semantic versioning), so that `clusterctl
// upgrade plan` offers only releases that come after the build:
//
//   - a release, "v1.2.3" or "1.2.3", is itself with a leading "v";
//   - what `git describe --tags --dirty` prints between releases is turned
//     into a pre-release of the next patch release: "v1.2.3-5-gabc1234"
//     (five commits after v1.2.3) is v1.2.4-dev.5+gabc1234, after v1.2.3 and
//     before v1.2.4. Kept as printed it would be a pre-release of v1.2.3,
//     and clusterctl would offer v1.2.3 as its upgrade. After a pre-release
//     tag the count extends that pre-release: "v1.3.0-rc.1-2-gabc1234" is
//     v1.3.0-rc.1.dev.2+gabc1234, before rc.2;
//   - uncommitted changes ("-dirty") are build metadata, which orders
//     nothing: "v1.2.3-dirty" is v1.2.3+dirty, not a pre-release of v1.2.3;
//   - anything else that is not a semantic version is DevVersion.
func Version(capstanVersion string) string {
	s, dirty := strings.CutSuffix(capstanVersion, "-dirty")
	var build []string
	if m := gitDescribed.FindStringSubmatch(s); m != nil {
		tag, err := utilversion.ParseSemantic(m[1])
		if err != nil {
			return DevVersion
		}
		build = append(build, "g"+m[3])
		if dirty {
			build = append(build, "dirty")
		}
		if tag.PreRelease() == "" {
			return fmt.Sprintf("v%d.%d.%d-dev.%s+%s", tag.Major(), tag.Minor(), tag.Patch()+1, m[2], strings.Join(build, "."))
		}
		return fmt.Sprintf("v%d.%d.%d-%s.dev.%s+%s", tag.Major(), tag.Minor(), tag.Patch(), tag.PreRelease(), m[2], strings.Join(build, "."))
	}
	v, err := utilversion.ParseSemantic(s)
	if err != nil {
		return DevVersion
	}
	if !dirty {
		return "v" + v.String()
	}
	if b := v.BuildMetadata(); b != "" {
		build = append(build, b)
	}
	build = append(build, "dirty")
	return "v" + v.WithBuildMetadata(strings.Join(build, ".")).String()
}

// gitDescribed matches a version as `git describe --tags` prints it for a
// commit after the tag: the tag, the number of commits since, and "g"
// followed by the abbreviated commit.
var gitDescribed = regexp.MustCompile(`^(.+)-([0-9]+)-g([0-9a-f]{4,})$`)

// Capstan's providers, as clusterctl names them.
var (
	core          = provider{"cluster-api", clusterctlv1.CoreProviderType}
	bootstrap     = provider{"kubeadm", clusterctlv1.BootstrapProviderType}
	controlPlane  = provider{"kubeadm", clusterctlv1.ControlPlaneProviderType}
	local         = provider{"local", clusterctlv1.InfrastructureProviderType}
	inMemory      = provider{"inmemory", clusterctlv1.InfrastructureProviderType}
	allCapstan    = []provider{core, bootstrap, controlPlane, local, inMemory}
	fieldsManaged = []string{"providerName", "type", "version", "watchedNamespace"}
)

type provider struct {
	name string
	typ  clusterctlv1.ProviderType
}

func (p provider) objectName() string { return clusterctlv1.ManifestLabel(p.name, p.typ) }

// Installed says what one installation of Capstan runs.
type Installed struct {
	// Namespace is where the providers run (deploy.Namespace); their
	// Provider objects live there.
	Namespace string
	// Version is Capstan's build version (internal/version.Version);
	// Version converts it for the inventory.
	Version string
	// Local and InMemory tell whether the local and in-memory
	// infrastructure providers run. The core, kubeadm bootstrap and kubeadm
	// control plane providers always do.
	Local, InMemory bool
}

// Providers are the inventory entries of the installation.
func (in Installed) Providers() []clusterctlv1.Provider {
	run := []provider{core, bootstrap, controlPlane}
	if in.Local {
		run = append(run, local)
	}
	if in.InMemory {
		run = append(run, inMemory)
	}
	out := make([]clusterctlv1.Provider, 0, len(run))
	for _, p := range run {
		out = append(out, clusterctlv1.Provider{
			TypeMeta: metav1.TypeMeta{APIVersion: clusterctlv1.GroupVersion.String(), Kind: clusterctlv1.ProviderKind},
			ObjectMeta: metav1.ObjectMeta{
				Namespace: in.Namespace,
				Name:      p.objectName(),
				Labels: map[string]string{
					clusterctlv1.ClusterctlLabel:     "",
					clusterctlv1.ProviderNameLabel:   p.objectName(),
					clusterctlv1.ClusterctlCoreLabel: clusterctlv1.ClusterctlCoreInventoryValue,
				},
			},
			ProviderName: p.name,
			Type:         string(p.typ),
			Version:      Version(in.Version),
		})
	}
	return out
}

// Result names the Provider objects Ensure wrote.
type Result struct {
	Created, Updated, Deleted []string
}

// Changed tells whether Ensure wrote anything.
func (r Result) Changed() bool {
	return len(r.Created)+len(r.Updated)+len(r.Deleted) > 0
}

// Ensure makes the inventory in the installation's namespace hold exactly
// its providers: it creates the namespace and the missing Provider objects,
// corrects the fields and labels of those that differ, and deletes the
// Provider objects of Capstan's other providers (one no longer run, such as
// the local provider after an init without it). Provider objects of other
// providers, and labels Capstan does not set, are left alone. It first waits
// up to timeout for the inventory CRD to be served, since it is usually
// applied just before.
func Ensure(ctx context.Context, c client.Client, in Installed, timeout time.Duration) (Result, error) {
	var res Result
	if err := waitServed(ctx, c, timeout); err != nil {
		return res, err
	}
	list := &clusterctlv1.ProviderList{}
	if err := c.List(ctx, list, client.InNamespace(in.Namespace)); err != nil {
		return res, fmt.Errorf("listing clusterctl's inventory in namespace %s: %w", in.Namespace, err)
	}
	live := map[string]*clusterctlv1.Provider{}
	for i := range list.Items {
		live[list.Items[i].Name] = &list.Items[i]
	}
	want := in.Providers()
	if len(want) > 0 && len(live) == 0 {
		if err := ensureNamespace(ctx, c, in.Namespace); err != nil {
			return res, err
		}
	}
	for i := range want {
		p := &want[i]
		current, ok := live[p.Name]
		switch {
		case !ok:
			if err := c.Create(ctx, p); err != nil {
				return res, fmt.Errorf("recording provider %s/%s in clusterctl's inventory: %w", p.Namespace, p.Name, err)
			}
			res.Created = append(res.Created, p.Name)
		case !matches(current, p):
			if err := c.Patch(ctx, current, mergePatch(p)); err != nil {
				return res, fmt.Errorf("updating provider %s/%s in clusterctl's inventory: %w", p.Namespace, p.Name, err)
			}
			res.Updated = append(res.Updated, p.Name)
		}
	}
	for _, p := range allCapstan {
		name := p.objectName()
		current, ok := live[name]
		if !ok || slices.ContainsFunc(want, func(w clusterctlv1.Provider) bool { return w.Name == name }) {
			continue
		}
		if current.ProviderName != p.name || current.Type != string(p.typ) {
			continue // not Capstan's entry, though named alike
		}
		if err := c.Delete(ctx, current); err != nil && !apierrors.IsNotFound(err) {
			return res, fmt.Errorf("removing provider %s/%s from clusterctl's inventory: %w", current.Namespace, name, err)
		}
		res.Deleted = append(res.Deleted, name)
	}
	return res, nil
}

// matches tells whether current already says what want says: the fields
// and the labels Capstan sets (other labels are someone else's).
func matches(current, want *clusterctlv1.Provider) bool {
	if current.ProviderName != want.ProviderName || current.Type != want.Type ||
		current.Version != want.Version || current.WatchedNamespace != want.WatchedNamespace {
		return false
	}
	for k, v := range want.Labels {
		if got, ok := current.Labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// mergePatch sets the fields and labels of want, and nothing else. A merge
// patch of absolute values needs no resourceVersion: it cannot undo a
// concurrent change to anything it does not set, and sets the same values
// however often it is repeated.
func mergePatch(want *clusterctlv1.Provider) client.Patch {
	body := map[string]any{"metadata": map[string]any{"labels": want.Labels}}
	fields := map[string]string{
		"providerName": want.ProviderName, "type": want.Type,
		"version": want.Version, "watchedNamespace": want.WatchedNamespace,
	}
	for _, f := range fieldsManaged {
		if fields[f] == "" {
			body[f] = nil // a merge patch removes a field set to null
		} else {
			body[f] = fields[f]
		}
	}
	return patch.Merge(body)
}

func ensureNamespace(ctx context.Context, c client.Client, name string) error {
	ns := &corev1.Namespace{}
	err := c.Get(ctx, client.ObjectKey{Name: name}, ns)
	if apierrors.IsNotFound(err) {
		ns.Name = name
		err = c.Create(ctx, ns)
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
	}
	if err != nil {
		return fmt.Errorf("namespace %s for clusterctl's inventory: %w", name, err)
	}
	if ns.DeletionTimestamp != nil {
		return fmt.Errorf("namespace %s for clusterctl's inventory is being deleted; wait until it is gone and run this again", name)
	}
	return nil
}

// waitServed waits until the inventory CRD is Established and the client
// maps its kind.
func waitServed(ctx context.Context, c client.Client, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		problem := served(ctx, c)
		if problem == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("clusterctl's inventory CRD %s is not served after %s: %w", CRDName, timeout, problem)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func served(ctx context.Context, c client.Client) error {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.Get(ctx, client.ObjectKey{Name: CRDName}, crd); err != nil {
		return err
	}
	established := slices.ContainsFunc(crd.Status.Conditions, func(cond apiextensionsv1.CustomResourceDefinitionCondition) bool {
		return cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue
	})
	if !established {
		return errors.New("not Established yet")
	}
	// The client's REST mapper learns of a new group lazily, and discovery
	// may lag the Established condition a little: asking for the kind here
	// makes the mapper look again until it finds it.
	gk := clusterctlv1.GroupVersion.WithKind(clusterctlv1.ProviderKind).GroupKind()
	if _, err := c.RESTMapper().RESTMapping(gk, clusterctlv1.GroupVersion.Version); err != nil {
		return fmt.Errorf("kind %s not discovered yet: %w", gk, err)
	}
	return nil
}
