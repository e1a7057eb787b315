package crd_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/config/crd"
)

// What the contract fixes for each CRD: its short names, whether it has a
// scale subresource and whether that names a label selector (a MachinePool's
// does not: it has no selector), and whether it has no status at all (a
// ClusterResourceSetBinding records everything in its spec).
var contractShape = map[string]struct {
	shortNames []string
	scale      bool
	noSelector bool
	// noStatus: the kind has no status at all (a MachineDrainRule is only
	// configuration), so no status subresource either.
	noStatus bool
}{
	"clusters.cluster.x-k8s.io":                                    {shortNames: []string{"cl"}},
	"machines.cluster.x-k8s.io":                                    {shortNames: []string{"ma"}},
	"machinesets.cluster.x-k8s.io":                                 {shortNames: []string{"ms"}, scale: true},
	"machinedeployments.cluster.x-k8s.io":                          {shortNames: []string{"md"}, scale: true},
	"machinepools.cluster.x-k8s.io":                                {shortNames: []string{"mp"}, scale: true, noSelector: true},
	"machinehealthchecks.cluster.x-k8s.io":                         {shortNames: []string{"mhc"}},
	"clusterresourcesets.addons.cluster.x-k8s.io":                  {},
	"clusterresourcesetbindings.addons.cluster.x-k8s.io":           {noStatus: true},
	"machinedrainrules.cluster.x-k8s.io":                           {noStatus: true},
	"kubeadmconfigs.bootstrap.cluster.x-k8s.io":                    {},
	"kubeadmconfigtemplates.bootstrap.cluster.x-k8s.io":            {},
	"kubeadmcontrolplanes.controlplane.cluster.x-k8s.io":           {shortNames: []string{"kcp"}, scale: true},
	"kubeadmcontrolplanetemplates.controlplane.cluster.x-k8s.io":   {},
	"localclusters.infrastructure.cluster.x-k8s.io":                {shortNames: []string{"lc"}},
	"localclustertemplates.infrastructure.cluster.x-k8s.io":        {},
	"localmachines.infrastructure.cluster.x-k8s.io":                {shortNames: []string{"lm"}},
	"localmachinetemplates.infrastructure.cluster.x-k8s.io":        {},
	"inmemoryclusters.infrastructure.cluster.x-k8s.io":             {shortNames: []string{"imc"}},
	"inmemoryclustertemplates.infrastructure.cluster.x-k8s.io":     {},
	"inmemorymachines.infrastructure.cluster.x-k8s.io":             {shortNames: []string{"imm"}},
	"inmemorymachinetemplates.infrastructure.cluster.x-k8s.io":     {},
	"inmemorymachinepools.infrastructure.cluster.x-k8s.io":         {shortNames: []string{"immp"}},
	"inmemorymachinepooltemplates.infrastructure.cluster.x-k8s.io": {},
	"localmachinepools.infrastructure.cluster.x-k8s.io":            {shortNames: []string{"lmp"}},
	"localmachinepooltemplates.infrastructure.cluster.x-k8s.io":    {},
	"qemuclusters.infrastructure.cluster.x-k8s.io":                 {shortNames: []string{"qc"}},
	"qemumachines.infrastructure.cluster.x-k8s.io":                 {shortNames: []string{"qm"}},
	"qemumachinetemplates.infrastructure.cluster.x-k8s.io":         {shortNames: []string{"qmt"}},
	"clusterclasses.cluster.x-k8s.io":                              {shortNames: []string{"cc"}},
}

func TestEmbeddedCRDsFollowTheContract(t *testing.T) {
	crds, err := crd.All()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, c := range crds {
		seen[c.Name] = true
		if c.Name == inventoryCRD {
			continue // not a contract kind; TestInventoryCRDMatchesClusterctl checks it
		}
		shape, known := contractShape[c.Name]
		if !known {
			t.Errorf("unexpected CRD %s: add it to contractShape", c.Name)
			continue
		}
		if got := c.Labels[clusterv1.ContractVersionLabel]; got != "v1beta2" {
			t.Errorf("%s: label %s=%q, want v1beta2", c.Name, clusterv1.ContractVersionLabel, got)
		}
		if !slices.Contains(c.Spec.Names.Categories, "cluster-api") {
			t.Errorf("%s: not in the cluster-api category", c.Name)
		}
		for _, s := range shape.shortNames {
			if !slices.Contains(c.Spec.Names.ShortNames, s) {
				t.Errorf("%s: short name %q missing (have %v)", c.Name, s, c.Spec.Names.ShortNames)
			}
		}
		if len(c.Spec.Versions) != 1 || c.Spec.Versions[0].Name != "v1beta2" || !c.Spec.Versions[0].Served || !c.Spec.Versions[0].Storage {
			t.Errorf("%s: want exactly v1beta2, served and stored", c.Name)
			continue
		}
		v := c.Spec.Versions[0]
		isTemplate := len(c.Spec.Names.Kind) > len("Template") && c.Spec.Names.Kind[len(c.Spec.Names.Kind)-len("Template"):] == "Template"
		hasStatus := v.Subresources != nil && v.Subresources.Status != nil
		if wantStatus := !isTemplate && !shape.noStatus; hasStatus != wantStatus {
			t.Errorf("%s: status subresource %v, want %v", c.Name, hasStatus, wantStatus)
		}
		hasScale := v.Subresources != nil && v.Subresources.Scale != nil
		if hasScale != shape.scale {
			t.Errorf("%s: scale subresource %v, want %v", c.Name, hasScale, shape.scale)
		}
		if hasScale {
			s := v.Subresources.Scale
			selectorOK := s.LabelSelectorPath != nil && *s.LabelSelectorPath == ".status.selector"
			if shape.noSelector {
				selectorOK = s.LabelSelectorPath == nil
			}
			if s.SpecReplicasPath != ".spec.replicas" || s.StatusReplicasPath != ".status.replicas" || !selectorOK {
				t.Errorf("%s: scale subresource paths %+v", c.Name, s)
			}
		}
	}
	for name := range contractShape {
		if !seen[name] {
			t.Errorf("CRD %s is not embedded", name)
		}
	}
}

// TestKubectlGetColumns asks the API server for the table kubectl prints and
// checks the columns users look at.
func TestKubectlGetColumns(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	cl := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: "columns", Namespace: ns},
		Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{
			APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "LocalCluster", Name: "columns",
		}},
	}
	if err := env.Client.Create(ctx, cl); err != nil {
		t.Fatal(err)
	}
	cl.Status.Phase = "Provisioned"
	if err := env.Client.Status().Update(ctx, cl); err != nil {
		t.Fatal(err)
	}

	want := map[string][]string{
		"clusters":                     {"Phase", "Age", "Version", "Available", "Paused"},
		"machines":                     {"Cluster", "Node Name", "Phase", "Age", "Version"},
		"machinesets":                  {"Cluster", "Desired", "Current", "Ready", "Available", "Up-to-date", "Age", "Version"},
		"machinedeployments":           {"Cluster", "Desired", "Current", "Ready", "Available", "Up-to-date", "Phase", "Age", "Version"},
		"machinepools":                 {"Cluster", "Desired", "Current", "Ready", "Available", "Up-to-date", "Phase", "Age", "Version"},
		"providers":                    {"Age", "Type", "Provider", "Version"},
		"machinehealthchecks":          {"Cluster", "Age"},
		"machinedrainrules":            {"Behavior", "Order", "Age"},
		"kubeadmcontrolplanes":         {"Cluster", "Desired", "Current", "Ready", "Available", "Up-to-date", "Initialized", "Age", "Version"},
		"kubeadmconfigs":               {"Cluster", "Age"},
		"kubeadmconfigtemplates":       {"Age"},
		"kubeadmcontrolplanetemplates": {"Age"},
		"localclusters":                {"Cluster", "Endpoint", "Provisioned", "Ready", "Age"},
		"localmachines":                {"Cluster", "Machine", "Phase", "PID", "Ready", "Age"},
		"localclustertemplates":        {"Age"},
		"localmachinetemplates":        {"Age"},
		"inmemoryclusters":             {"Cluster", "Endpoint", "Port", "Provisioned", "Age"},
		"inmemorymachines":             {"Cluster", "Machine", "Provisioned", "Age"},
		"inmemorymachinepools":         {"Cluster", "MachinePool", "Replicas", "Ready", "Age"},
		"localmachinepools":            {"Cluster", "MachinePool", "Replicas", "Ready", "Age"},
		"qemuclusters":                 {"Cluster", "Endpoint", "Provisioned", "Ready", "Age"},
		"qemumachines":                 {"Cluster", "Machine", "CPUs", "Memory", "VM", "Ready", "Age"},
		"qemumachinetemplates":         {"CPUs", "Memory", "Age"},
	}
	group := map[string]string{
		"kubeadmcontrolplanes": "controlplane.cluster.x-k8s.io", "kubeadmcontrolplanetemplates": "controlplane.cluster.x-k8s.io",
		"kubeadmconfigs": "bootstrap.cluster.x-k8s.io", "kubeadmconfigtemplates": "bootstrap.cluster.x-k8s.io",
		"localclusters": "infrastructure.cluster.x-k8s.io", "localmachines": "infrastructure.cluster.x-k8s.io",
		"localclustertemplates": "infrastructure.cluster.x-k8s.io", "localmachinetemplates": "infrastructure.cluster.x-k8s.io",
		"inmemoryclusters": "infrastructure.cluster.x-k8s.io", "inmemorymachines": "infrastructure.cluster.x-k8s.io",
		"inmemorymachinepools": "infrastructure.cluster.x-k8s.io", "localmachinepools": "infrastructure.cluster.x-k8s.io",
		"qemuclusters": "infrastructure.cluster.x-k8s.io", "qemumachines": "infrastructure.cluster.x-k8s.io",
		"qemumachinetemplates": "infrastructure.cluster.x-k8s.io",
		"providers":            "clusterctl.cluster.x-k8s.io",
	}
	version := map[string]string{"providers": "v1alpha3"}
	rc, err := rest.UnversionedRESTClientFor(tableConfig())
	if err != nil {
		t.Fatal(err)
	}
	for resource, columns := range want {
		g := group[resource]
		if g == "" {
			g = "cluster.x-k8s.io"
		}
		v := version[resource]
		if v == "" {
			v = "v1beta2"
		}
		raw, err := rc.Get().AbsPath("/apis", g, v, "namespaces", ns, resource).
			SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(ctx)
		if err != nil {
			t.Fatalf("%s: %v", resource, err)
		}
		var table metav1.Table
		if err := json.Unmarshal(raw, &table); err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, c := range table.ColumnDefinitions {
			names = append(names, c.Name)
		}
		for _, c := range columns {
			if !slices.Contains(names, c) {
				t.Errorf("kubectl get %s: no %q column (have %v)", resource, c, names)
			}
		}
		if resource == "clusters" {
			phase := slices.Index(names, "Phase")
			if len(table.Rows) != 1 || phase < 0 || table.Rows[0].Cells[phase] != "Provisioned" {
				t.Errorf("kubectl get clusters: want one row with Phase Provisioned, got %v", table.Rows)
			}
		}
	}
}

func tableConfig() *rest.Config {
	cfg := rest.CopyConfig(env.Config)
	cfg.GroupVersion = &apiextensionsv1.SchemeGroupVersion
	cfg.NegotiatedSerializer = clientgoscheme.Codecs.WithoutConversion()
	return cfg
}
