package crd_test

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterctlv1 "capstan.dev/capstan/api/clusterctl/v1alpha3"
	"capstan.dev/capstan/config/crd"
)

// inventoryCRD is clusterctl's provider inventory, which Capstan installs
// and fills in too.
const inventoryCRD = "providers.clusterctl.cluster.x-k8s.io"

// providerOf is the cluster.x-k8s.io/provider label clusterctl would give
// each CRD when installing the provider it belongs to.
var providerOf = map[string]string{
	"clusters.cluster.x-k8s.io":                                    "cluster-api",
	"machines.cluster.x-k8s.io":                                    "cluster-api",
	"machinesets.cluster.x-k8s.io":                                 "cluster-api",
	"machinedeployments.cluster.x-k8s.io":                          "cluster-api",
	"machinepools.cluster.x-k8s.io":                                "cluster-api",
	"machinehealthchecks.cluster.x-k8s.io":                         "cluster-api",
	"clusterresourcesets.addons.cluster.x-k8s.io":                  "cluster-api",
	"clusterresourcesetbindings.addons.cluster.x-k8s.io":           "cluster-api",
	"machinedrainrules.cluster.x-k8s.io":                           "cluster-api",
	"kubeadmconfigs.bootstrap.cluster.x-k8s.io":                    "bootstrap-kubeadm",
	"kubeadmconfigtemplates.bootstrap.cluster.x-k8s.io":            "bootstrap-kubeadm",
	"kubeadmcontrolplanes.controlplane.cluster.x-k8s.io":           "control-plane-kubeadm",
	"kubeadmcontrolplanetemplates.controlplane.cluster.x-k8s.io":   "control-plane-kubeadm",
	"localclusters.infrastructure.cluster.x-k8s.io":                "infrastructure-local",
	"localclustertemplates.infrastructure.cluster.x-k8s.io":        "infrastructure-local",
	"localmachines.infrastructure.cluster.x-k8s.io":                "infrastructure-local",
	"localmachinetemplates.infrastructure.cluster.x-k8s.io":        "infrastructure-local",
	"inmemoryclusters.infrastructure.cluster.x-k8s.io":             "infrastructure-inmemory",
	"inmemoryclustertemplates.infrastructure.cluster.x-k8s.io":     "infrastructure-inmemory",
	"inmemorymachines.infrastructure.cluster.x-k8s.io":             "infrastructure-inmemory",
	"inmemorymachinetemplates.infrastructure.cluster.x-k8s.io":     "infrastructure-inmemory",
	"inmemorymachinepools.infrastructure.cluster.x-k8s.io":         "infrastructure-inmemory",
	"inmemorymachinepooltemplates.infrastructure.cluster.x-k8s.io": "infrastructure-inmemory",
	"localmachinepools.infrastructure.cluster.x-k8s.io":            "infrastructure-local",
	"localmachinepooltemplates.infrastructure.cluster.x-k8s.io":    "infrastructure-local",
	"qemuclusters.infrastructure.cluster.x-k8s.io":                 "infrastructure-qemu",
	"qemumachines.infrastructure.cluster.x-k8s.io":                 "infrastructure-qemu",
	"qemumachinetemplates.infrastructure.cluster.x-k8s.io":         "infrastructure-qemu",
	"clusterclasses.cluster.x-k8s.io":                              "cluster-api",
}

// Every CRD of a kind that belongs to clusters carries the labels clusterctl
// puts on what it installs: clusterctl move finds the kinds to move by the
// first, and clusterctl delete and upgrade find a provider's CRDs by the
// second. Without them upstream clusterctl move exits 0 having moved
// nothing.
func TestCRDsCarryClusterctlLabels(t *testing.T) {
	crds, err := crd.All()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, c := range crds {
		seen[c.Name] = true
		if c.Name == inventoryCRD {
			continue
		}
		want, known := providerOf[c.Name]
		if !known {
			t.Errorf("CRD %s has no expected provider: add it to providerOf", c.Name)
			continue
		}
		if v, ok := c.Labels[clusterctlv1.ClusterctlLabel]; !ok || v != "" {
			t.Errorf("%s: label %s=%q (present %v), want present with an empty value", c.Name, clusterctlv1.ClusterctlLabel, v, ok)
		}
		if got := c.Labels[clusterctlv1.ProviderNameLabel]; got != want {
			t.Errorf("%s: label %s=%q, want %q", c.Name, clusterctlv1.ProviderNameLabel, got, want)
		}
		if _, ok := c.Labels[clusterctlv1.ClusterctlCoreLabel]; ok {
			t.Errorf("%s: carries %s, which marks clusterctl's own objects", c.Name, clusterctlv1.ClusterctlCoreLabel)
		}
	}
	for name := range providerOf {
		if !seen[name] {
			t.Errorf("CRD %s is not embedded", name)
		}
	}
}

// Capstan's copy of clusterctl's inventory CRD has clusterctl's name,
// version, scope, fields and label, and not the move label: clusterctl
// never moves its inventory.
func TestInventoryCRDMatchesClusterctl(t *testing.T) {
	crds, err := crd.All()
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(crds, func(c *apiextensionsv1.CustomResourceDefinition) bool { return c.Name == inventoryCRD })
	if i < 0 {
		t.Fatalf("CRD %s is not embedded", inventoryCRD)
	}
	c := crds[i]
	wantLabels := map[string]string{clusterctlv1.ClusterctlCoreLabel: clusterctlv1.ClusterctlCoreInventoryValue}
	if !maps.Equal(c.Labels, wantLabels) {
		t.Errorf("labels %v, want exactly %v", c.Labels, wantLabels)
	}
	if c.Spec.Group != "clusterctl.cluster.x-k8s.io" || c.Spec.Names.Kind != "Provider" || c.Spec.Names.Plural != "providers" ||
		c.Spec.Scope != apiextensionsv1.NamespaceScoped {
		t.Errorf("group %s kind %s plural %s scope %s, want clusterctl.cluster.x-k8s.io Provider providers Namespaced",
			c.Spec.Group, c.Spec.Names.Kind, c.Spec.Names.Plural, c.Spec.Scope)
	}
	if len(c.Spec.Versions) != 1 || c.Spec.Versions[0].Name != "v1alpha3" || !c.Spec.Versions[0].Served || !c.Spec.Versions[0].Storage {
		t.Fatalf("versions %+v, want exactly v1alpha3, served and stored", c.Spec.Versions)
	}
	props := c.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties
	for _, f := range []string{"providerName", "type", "version", "watchedNamespace"} {
		if props[f].Type != "string" {
			t.Errorf("field %s: type %q, want string", f, props[f].Type)
		}
	}
}

// clusterctl move lists the CRDs that have the clusterctl label; against a
// real API server, that finds every one of Capstan's kinds and not the
// inventory.
func TestClusterctlDiscoversEveryKindToMove(t *testing.T) {
	list := &apiextensionsv1.CustomResourceDefinitionList{}
	if err := env.Client.List(context.Background(), list, client.HasLabels{clusterctlv1.ClusterctlLabel}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range list.Items {
		if strings.HasSuffix(c.Spec.Group, "cluster.x-k8s.io") {
			got = append(got, c.Name)
		}
	}
	want := slices.Sorted(maps.Keys(providerOf))
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("CRDs with the %s label:\n  %v\nwant\n  %v", clusterctlv1.ClusterctlLabel, got, want)
	}
}
