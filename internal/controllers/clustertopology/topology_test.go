package clustertopology_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"

	corev1 "k8s.io/api/core/v1"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/bench"
	"capstan.dev/capstan/internal/contract"
	"capstan.dev/capstan/internal/controllers/clustertopology"
	"capstan.dev/capstan/internal/plan"
	"capstan.dev/capstan/internal/topology/desired"
	fx "capstan.dev/capstan/test/fixture"
	"capstan.dev/capstan/test/provider"
)

const wait = 30 * time.Second

// mdShape and shape describe a hand-built desired state.
type mdShape struct {
	size, format string
	replicas     int32
	healthCheck  bool
}

type shape struct {
	region     string
	cpReplicas int64
	cpSize     string
	mds        map[string]mdShape
	pools      map[string]string // topology name → bootstrap format
	upgrade    plan.TopologyUpgrade
	// infraKind is the infrastructure cluster's kind (TestCluster when
	// unset): another one is what a rebase onto a class of other kinds
	// would bring.
	infraKind provider.Kind
}

type fixture struct {
	ns      string
	cluster *clusterv1.Cluster
	class   *clusterv1.ClusterClass
	pokes   int
}

// newFixture makes a namespace with a ClusterClass "cc" (reconciled, as its
// controller would report it) whose templates are the test provider's, and
// a topology Cluster "c" whose desired state sh describes.
func newFixture(t *testing.T, sh shape, classOpts ...func(*clusterv1.ClusterClass)) *fixture {
	t.Helper()
	ns := env.Namespace(t)
	machine := provider.InfraMachineTemplate.New(ns, "class-machine", map[string]any{"template": map[string]any{"spec": map[string]any{}}})
	boot := provider.BootstrapConfigTemplate.New(ns, "class-bootstrap", map[string]any{"template": map[string]any{"spec": map[string]any{}}})
	machineRef := clusterv1.ClusterClassTemplateReference{APIVersion: provider.InfrastructureGroup + "/v1beta2", Kind: provider.InfraMachineTemplate.Kind, Name: machine.GetName()}
	bootRef := clusterv1.ClusterClassTemplateReference{APIVersion: provider.BootstrapGroup + "/v1beta2", Kind: provider.BootstrapConfigTemplate.Kind, Name: boot.GetName()}
	class := &clusterv1.ClusterClass{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cc"},
		Spec: clusterv1.ClusterClassSpec{
			Infrastructure: clusterv1.InfrastructureClass{TemplateRef: machineRef},
			ControlPlane: clusterv1.ControlPlaneClass{
				TemplateRef:           machineRef,
				MachineInfrastructure: clusterv1.ControlPlaneClassMachineInfrastructureTemplate{TemplateRef: machineRef},
			},
			Workers: clusterv1.WorkersClass{MachineDeployments: []clusterv1.MachineDeploymentClass{{
				Class:          "default-worker",
				Bootstrap:      clusterv1.MachineDeploymentClassBootstrapTemplate{TemplateRef: bootRef},
				Infrastructure: clusterv1.MachineDeploymentClassInfrastructureTemplate{TemplateRef: machineRef},
			}}},
		},
	}
	for _, o := range classOpts {
		o(class)
	}
	fx.Create(t, env.Client, machine, boot, class)
	markReconciled(t, class)

	f := &fixture{ns: ns, class: class}
	f.cluster = &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c"},
		Spec: clusterv1.ClusterSpec{Topology: clusterv1.Topology{
			ClassRef: clusterv1.ClusterClassRef{Name: class.Name},
			Version:  "v1.33.0",
			Workers: clusterv1.WorkersTopology{MachineDeployments: []clusterv1.MachineDeploymentTopology{
				{Class: "default-worker", Name: "a"},
			}},
		}},
	}
	states.Store(clusterKey(f.cluster), build(ns, sh))
	fx.Create(t, env.Client, f.cluster)
	return f
}

// markReconciled reports the class as its controller does once it checked
// it.
func markReconciled(t *testing.T, class *clusterv1.ClusterClass) {
	t.Helper()
	get(t, class)
	class.Status.ObservedGeneration = class.Generation
	meta.SetStatusCondition(&class.Status.Conditions, metav1.Condition{Type: clusterv1.ClusterClassVariablesReadyCondition, Status: metav1.ConditionTrue, Reason: "VariablesReady"})
	if err := env.Client.Status().Update(context.Background(), class); err != nil {
		t.Fatal(err)
	}
}

// set makes sh the state the topology wants and wakes the Cluster, as a
// change of its topology would.
func (f *fixture) set(t *testing.T, sh shape) {
	t.Helper()
	states.Store(clusterKey(f.cluster), build(f.ns, sh))
	f.poke(t)
}

// poke changes an annotation of the Cluster, which makes the topology
// reconcile it.
func (f *fixture) poke(t *testing.T) {
	t.Helper()
	f.pokes++
	body := fmt.Sprintf(`{"metadata":{"annotations":{"test.capstan.dev/poke":"%d"}}}`, f.pokes)
	if err := env.Client.Patch(context.Background(), &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: f.cluster.Name}},
		client.RawPatch(types.MergePatchType, []byte(body))); err != nil {
		t.Fatal(err)
	}
}

// build returns the desired state sh describes, fresh on every call as a
// computation's would be.
func build(ns string, sh shape) func(desired.Input) *desired.State {
	return func(in desired.Input) *desired.State {
		c := in.Cluster.Name
		infraKind := provider.InfraCluster
		if sh.infraKind.Kind != "" {
			infraKind = sh.infraKind
		}
		st := &desired.State{
			InfrastructureCluster: infraKind.New(ns, c+"-infra", map[string]any{"region": sh.region}),
			ControlPlane:          provider.ControlPlane.New(ns, c+"-cp", map[string]any{"replicas": sh.cpReplicas, "version": "v1.33.0"}),
			ControlPlaneMachineInfrastructure: provider.InfraMachineTemplate.New(ns, "", map[string]any{
				"template": map[string]any{"spec": map[string]any{"size": sh.cpSize}},
			}),
			MachineDeployments: map[string]*desired.MachineDeployment{},
			Upgrade:            sh.upgrade,
		}
		for name, md := range sh.mds {
			state := &desired.MachineDeployment{
				Object: &clusterv1.MachineDeployment{
					ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: c + "-" + name},
					Spec: clusterv1.MachineDeploymentSpec{
						ClusterName: in.Cluster.Name,
						Replicas:    ptr.To(md.replicas),
						Template: clusterv1.MachineTemplateSpec{Spec: clusterv1.MachineSpec{
							ClusterName: in.Cluster.Name,
							Version:     "v1.33.0",
						}},
					},
				},
				Infrastructure: provider.InfraMachineTemplate.New(ns, "", map[string]any{"template": map[string]any{"spec": map[string]any{"size": md.size}}}),
				Bootstrap:      provider.BootstrapConfigTemplate.New(ns, "", map[string]any{"template": map[string]any{"spec": map[string]any{"format": md.format}}}),
			}
			if md.healthCheck {
				state.HealthCheck = &clusterv1.MachineHealthCheck{
					ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: c + "-" + name},
					Spec: clusterv1.MachineHealthCheckSpec{
						ClusterName: in.Cluster.Name,
						Selector:    metav1.LabelSelector{MatchLabels: map[string]string{clusterv1.ClusterTopologyMachineDeploymentNameLabel: name}},
						Checks:      clusterv1.MachineHealthCheckChecks{NodeStartupTimeoutSeconds: ptr.To[int32](600)},
					},
				}
			}
			st.MachineDeployments[name] = state
		}
		st.MachinePools = map[string]*desired.MachinePool{}
		for name, format := range sh.pools {
			st.MachinePools[name] = &desired.MachinePool{
				Object: &clusterv1.MachinePool{
					ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c-" + name},
					Spec: clusterv1.MachinePoolSpec{
						ClusterName: in.Cluster.Name,
						Replicas:    ptr.To[int32](2),
						Template: clusterv1.MachineTemplateSpec{Spec: clusterv1.MachineSpec{
							ClusterName: in.Cluster.Name,
							Version:     "v1.33.0",
						}},
					},
				},
				Bootstrap:      provider.BootstrapConfig.New(ns, "c-"+name+"-boot", map[string]any{"format": format}),
				Infrastructure: provider.InfraMachinePool.New(ns, "c-"+name+"-pool", map[string]any{"size": "small"}),
			}
		}
		return st
	}
}

func twoWorkers() shape {
	return shape{region: "north", cpReplicas: 1, cpSize: "small", mds: map[string]mdShape{
		"a": {size: "small", format: "cloud-config", replicas: 2, healthCheck: true},
		"b": {size: "medium", format: "ignition", replicas: 1},
	}}
}

func oneWorker() shape {
	return shape{region: "north", cpReplicas: 1, cpSize: "small", mds: map[string]mdShape{
		"a": {size: "small", format: "cloud-config", replicas: 2, healthCheck: true},
	}}
}

// reconciled waits until the Cluster's TopologyReconciled condition is True
// for its current generation and returns the Cluster.
func (f *fixture) reconciled(t *testing.T) *clusterv1.Cluster {
	t.Helper()
	c := &clusterv1.Cluster{}
	fx.Eventually(t, "TopologyReconciled True", wait, func(ctx context.Context) string {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(f.cluster), c); err != nil {
			return err.Error()
		}
		cond := meta.FindStatusCondition(c.Status.Conditions, clusterv1.ClusterTopologyReconciledCondition)
		if cond == nil || cond.Status != metav1.ConditionTrue || cond.ObservedGeneration != c.Generation {
			return fmt.Sprintf("TopologyReconciled is %+v", cond)
		}
		return ""
	})
	return c
}

// condition waits until TopologyReconciled has the given status and reason
// and a message containing msg.
func (f *fixture) condition(t *testing.T, status metav1.ConditionStatus, reason, msg string) {
	t.Helper()
	fx.Eventually(t, "TopologyReconciled "+reason, wait, func(ctx context.Context) string {
		c := &clusterv1.Cluster{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(f.cluster), c); err != nil {
			return err.Error()
		}
		cond := meta.FindStatusCondition(c.Status.Conditions, clusterv1.ClusterTopologyReconciledCondition)
		if cond == nil || cond.Status != status || cond.Reason != reason || !strings.Contains(cond.Message, msg) {
			return fmt.Sprintf("TopologyReconciled is %+v", cond)
		}
		return ""
	})
}

func getU(t *testing.T, kind provider.Kind, ns, name string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(kind.GVK())
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, u); err != nil {
		t.Fatalf("reading %s %s: %v", kind.Kind, name, err)
	}
	return u
}

// owned lists the objects of kind the topology made in ns (with the extra
// labels given), by name.
func owned(t *testing.T, kind provider.Kind, ns string, extra map[string]string) map[string]*unstructured.Unstructured {
	t.Helper()
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(kind.GVK().GroupVersion().WithKind(kind.Kind + "List"))
	sel := client.MatchingLabels{clusterv1.ClusterTopologyOwnedLabel: ""}
	maps.Copy(sel, extra)
	if err := env.Client.List(context.Background(), list, client.InNamespace(ns), sel); err != nil {
		t.Fatal(err)
	}
	out := map[string]*unstructured.Unstructured{}
	for i := range list.Items {
		out[list.Items[i].GetName()] = &list.Items[i]
	}
	return out
}

func nestedString(u *unstructured.Unstructured, path ...string) string {
	s, _, _ := unstructured.NestedString(u.Object, path...)
	return s
}

func md(t *testing.T, ns, name string) *clusterv1.MachineDeployment {
	t.Helper()
	m := &clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	get(t, m)
	return m
}

// writes counts the API writes to the kinds the topology makes (and to
// Clusters, apart) since before.
func writes(t *testing.T, before bench.RequestCounts) (topology, clusters float64, detail []string) {
	t.Helper()
	after, err := bench.ScrapeRequests(context.Background(), env.Config)
	if err != nil {
		t.Fatal(err)
	}
	made := map[string]bool{
		"testclusters": true, "testcontrolplanes": true, "testmachinetemplates": true, "testbootstrapconfigtemplates": true,
		"machinedeployments": true, "machinehealthchecks": true, "machinepools": true,
	}
	for key, n := range after.Minus(before).ByVerbResource {
		verb, resource, _ := strings.Cut(key, " ")
		switch verb {
		case "POST", "PUT", "PATCH", "APPLY", "DELETE", "DELETECOLLECTION":
		default:
			continue
		}
		base, _, _ := strings.Cut(resource, "/")
		switch {
		case made[base]:
			topology += n
			detail = append(detail, fmt.Sprintf("%s: %.0f", key, n))
		case base == "clusters":
			clusters += n
			detail = append(detail, fmt.Sprintf("%s: %.0f", key, n))
		}
	}
	slices.Sort(detail)
	return topology, clusters, detail
}

func scrape(t *testing.T) bench.RequestCounts {
	t.Helper()
	// The counts are the whole API server's: an earlier test's namespace
	// still being deleted (its topology Clusters and their objects going)
	// would count as this test's writes.
	fx.Eventually(t, "no namespace of an earlier test terminating", wait, func(ctx context.Context) string {
		namespaces := &corev1.NamespaceList{}
		if err := env.Client.List(ctx, namespaces); err != nil {
			return err.Error()
		}
		for _, ns := range namespaces.Items {
			if !ns.DeletionTimestamp.IsZero() {
				return "namespace " + ns.Name + " is terminating"
			}
		}
		return ""
	})
	c, err := bench.ScrapeRequests(context.Background(), env.Config)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestAppliesStateInOrderAndReapplyingWritesNothing: a hand-built state
// comes out as objects with the topology's labels and owners, the
// Cluster's references and the control plane's machine template set; a
// reconcile that finds everything in place writes nothing at all.
func TestAppliesStateInOrderAndReapplyingWritesNothing(t *testing.T) {
	f := newFixture(t, twoWorkers())
	c := f.reconciled(t)

	if c.Spec.InfrastructureRef != provider.InfraCluster.Ref("c-infra") || c.Spec.ControlPlaneRef != provider.ControlPlane.Ref("c-cp") {
		t.Fatalf("Cluster references %+v and %+v", c.Spec.InfrastructureRef, c.Spec.ControlPlaneRef)
	}
	infra := getU(t, provider.InfraCluster, f.ns, "c-infra")
	if nestedString(infra, "spec", "region") != "north" {
		t.Errorf("infrastructure cluster spec %v", infra.Object["spec"])
	}
	if ref := metav1.GetControllerOf(infra); ref == nil || ref.UID != c.UID {
		t.Errorf("infrastructure cluster controller %+v, want the Cluster", ref)
	}
	cp := getU(t, provider.ControlPlane, f.ns, "c-cp")
	cpTemplate, err := contract.ControlPlaneMachineTemplateRef(cp)
	if err != nil || !strings.HasPrefix(cpTemplate.Name, "c-") {
		t.Fatalf("control plane machine template %+v, %v", cpTemplate, err)
	}
	tmpl := getU(t, provider.InfraMachineTemplate, f.ns, cpTemplate.Name)
	if nestedString(tmpl, "spec", "template", "spec", "size") != "small" || tmpl.GetLabels()[clusterv1.ClusterTopologyOwnedLabel] != "" ||
		tmpl.GetLabels()[clusterv1.ClusterNameLabel] != "c" {
		t.Errorf("control plane machine template %v", tmpl.Object)
	}

	for name, want := range twoWorkers().mds {
		m := md(t, f.ns, "c-"+name)
		if m.Labels[clusterv1.ClusterTopologyMachineDeploymentNameLabel] != name || ptr.Deref(m.Spec.Replicas, 0) != want.replicas {
			t.Errorf("MachineDeployment %s: labels %v, replicas %v", m.Name, m.Labels, m.Spec.Replicas)
		}
		infraT := getU(t, provider.InfraMachineTemplate, f.ns, m.Spec.Template.Spec.InfrastructureRef.Name)
		bootT := getU(t, provider.BootstrapConfigTemplate, f.ns, m.Spec.Template.Spec.Bootstrap.ConfigRef.Name)
		if nestedString(infraT, "spec", "template", "spec", "size") != want.size || nestedString(bootT, "spec", "template", "spec", "format") != want.format {
			t.Errorf("MachineDeployment %s templates: %v, %v", name, infraT.Object["spec"], bootT.Object["spec"])
		}
		if infraT.GetLabels()[clusterv1.ClusterTopologyMachineDeploymentNameLabel] != name {
			t.Errorf("template %s labels %v", infraT.GetName(), infraT.GetLabels())
		}
		mhc := &clusterv1.MachineHealthCheck{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "c-" + name}}
		err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(mhc), mhc)
		switch {
		case want.healthCheck && err != nil:
			t.Errorf("MachineHealthCheck of %s: %v", name, err)
		case want.healthCheck && (len(mhc.OwnerReferences) != 1 || mhc.OwnerReferences[0].UID != c.UID):
			t.Errorf("MachineHealthCheck of %s owners %+v, want the Cluster", name, mhc.OwnerReferences)
		case !want.healthCheck && !apierrors.IsNotFound(err):
			t.Errorf("MachineHealthCheck of %s: %v, want none", name, err)
		}
		applied := false
		for _, e := range m.ManagedFields {
			if e.Manager == clustertopology.FieldManager && e.Operation == metav1.ManagedFieldsOperationApply {
				applied = true
			}
		}
		if !applied {
			t.Errorf("MachineDeployment %s was not applied by %s: %+v", name, clustertopology.FieldManager, m.ManagedFields)
		}
	}

	// One event names everything the topology created.
	fx.Eventually(t, "one TopologyCreate event naming every object made", wait, func(ctx context.Context) string {
		list := &eventsv1.EventList{}
		if err := env.Client.List(ctx, list, client.InNamespace(f.ns)); err != nil {
			return err.Error()
		}
		var notes []string
		for _, e := range list.Items {
			if e.Reason == "TopologyCreate" && e.Regarding.Name == "c" {
				notes = append(notes, e.Note)
			}
		}
		if len(notes) != 1 {
			return fmt.Sprintf("%d TopologyCreate events: %q", len(notes), notes)
		}
		for _, want := range []string{provider.InfraCluster.Kind + " c-infra", provider.ControlPlane.Kind + " c-cp", "MachineDeployment c-"} {
			if !strings.Contains(notes[0], want) {
				return fmt.Sprintf("the event %q does not name %q", notes[0], want)
			}
		}
		return ""
	})

	// Nothing changes: a reconcile writes nothing, to the objects or to
	// the Cluster (beyond the test's own poke).
	before := scrape(t)
	n := computations(f.cluster)
	f.poke(t)
	fx.Eventually(t, "a reconcile after the poke", wait, func(context.Context) string {
		return fx.Unless(computations(f.cluster) > n, "no computation yet")
	})
	fx.Consistently(t, "no writes", 2*time.Second, func(context.Context) string {
		topo, clusters, detail := writes(t, before)
		return fx.Unless(topo == 0 && clusters <= 1, fmt.Sprintf("writes after a reconcile that changes nothing: %v", detail))
	})
}

// TestUserEditOfManagedFieldIsSetBackForeignFieldsStay: a user's change of
// a field the topology sets goes back; what others add stays.
func TestUserEditOfManagedFieldIsSetBackForeignFieldsStay(t *testing.T) {
	f := newFixture(t, oneWorker())
	f.reconciled(t)

	patch := func(obj client.Object, body string) {
		t.Helper()
		if err := env.Client.Patch(context.Background(), obj, client.RawPatch(types.MergePatchType, []byte(body)), client.FieldOwner("a-user")); err != nil {
			t.Fatal(err)
		}
	}
	patch(&clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "c-a"}},
		`{"metadata":{"labels":{"example.com/team":"blue"}},"spec":{"replicas":5}}`)
	infra := &unstructured.Unstructured{}
	infra.SetGroupVersionKind(provider.InfraCluster.GVK())
	infra.SetNamespace(f.ns)
	infra.SetName("c-infra")
	patch(infra, `{"spec":{"region":"south","zone":"z1"}}`)

	fx.Eventually(t, "managed fields set back, foreign ones kept", wait, func(ctx context.Context) string {
		m := &clusterv1.MachineDeployment{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "c-a"}, m); err != nil {
			return err.Error()
		}
		u := getU(t, provider.InfraCluster, f.ns, "c-infra")
		switch {
		case ptr.Deref(m.Spec.Replicas, 0) != 2:
			return fmt.Sprintf("MachineDeployment replicas %v, want 2", m.Spec.Replicas)
		case m.Labels["example.com/team"] != "blue":
			return fmt.Sprintf("the user's label is gone: %v", m.Labels)
		case nestedString(u, "spec", "region") != "north":
			return fmt.Sprintf("region %q, want north", nestedString(u, "spec", "region"))
		case nestedString(u, "spec", "zone") != "z1":
			return fmt.Sprintf("the user's zone is gone: %v", u.Object["spec"])
		}
		return ""
	})
}

// TestTemplateRotation: a template whose spec changes is replaced by a new
// one, its user switched to it, and the old one deleted once nothing uses
// it: at once for the control plane's, only after the last MachineSet that
// references it for a MachineDeployment's.
func TestTemplateRotation(t *testing.T) {
	f := newFixture(t, oneWorker())
	f.reconciled(t)
	oldCP, _ := contract.ControlPlaneMachineTemplateRef(getU(t, provider.ControlPlane, f.ns, "c-cp"))
	before := md(t, f.ns, "c-a")
	oldInfra, oldBoot := before.Spec.Template.Spec.InfrastructureRef, before.Spec.Template.Spec.Bootstrap.ConfigRef

	// An older revision's MachineSet still clones the current template.
	ms := &clusterv1.MachineSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "c-a-old", Labels: map[string]string{clusterv1.ClusterNameLabel: "c"}},
		Spec: clusterv1.MachineSetSpec{
			ClusterName: "c",
			Template: clusterv1.MachineTemplateSpec{Spec: clusterv1.MachineSpec{
				ClusterName: "c", InfrastructureRef: oldInfra, Bootstrap: clusterv1.Bootstrap{ConfigRef: oldBoot},
			}},
		},
	}
	fx.Create(t, env.Client, ms)

	sh := oneWorker()
	sh.cpSize = "large"
	sh.mds["a"] = mdShape{size: "large", format: "cloud-config", replicas: 2, healthCheck: true}
	f.set(t, sh)

	var newInfra clusterv1.ContractVersionedObjectReference
	fx.Eventually(t, "rotated templates", wait, func(ctx context.Context) string {
		cpRef, _ := contract.ControlPlaneMachineTemplateRef(getU(t, provider.ControlPlane, f.ns, "c-cp"))
		m := md(t, f.ns, "c-a")
		newInfra = m.Spec.Template.Spec.InfrastructureRef
		switch {
		case cpRef.Name == oldCP.Name:
			return "the control plane still uses " + oldCP.Name
		case newInfra.Name == oldInfra.Name:
			return "the MachineDeployment still uses " + oldInfra.Name
		case m.Spec.Template.Spec.Bootstrap.ConfigRef != oldBoot:
			return fmt.Sprintf("the bootstrap template, whose spec did not change, was replaced: %+v", m.Spec.Template.Spec.Bootstrap.ConfigRef)
		}
		if size := nestedString(getU(t, provider.InfraMachineTemplate, f.ns, newInfra.Name), "spec", "template", "spec", "size"); size != "large" {
			return "the new template's size is " + size
		}
		return ""
	})
	fx.Eventually(t, "the control plane's old template deleted", wait, func(context.Context) string {
		_, found := owned(t, provider.InfraMachineTemplate, f.ns, nil)[oldCP.Name]
		return fx.Unless(!found, oldCP.Name+" still exists")
	})
	fx.Consistently(t, "the MachineSet's template kept", time.Second, func(context.Context) string {
		_, found := owned(t, provider.InfraMachineTemplate, f.ns, nil)[oldInfra.Name]
		return fx.Unless(found, oldInfra.Name+" was deleted while a MachineSet references it")
	})

	if err := env.Client.Delete(context.Background(), ms); err != nil {
		t.Fatal(err)
	}
	fx.Eventually(t, "only the templates in use left", wait, func(context.Context) string {
		got := slices.Sorted(maps.Keys(owned(t, provider.InfraMachineTemplate, f.ns, map[string]string{clusterv1.ClusterTopologyMachineDeploymentNameLabel: "a"})))
		return fx.Unless(slices.Equal(got, []string{newInfra.Name}), fmt.Sprintf("MachineDeployment templates %v, want only %s", got, newInfra.Name))
	})
	f.reconciled(t)
}

// TestRemovedMachineDeploymentIsDeletedWithItsObjects: a MachineDeployment
// the topology no longer lists goes, with its health check and templates.
func TestRemovedMachineDeploymentIsDeletedWithItsObjects(t *testing.T) {
	sh := twoWorkers()
	sh.mds["b"] = mdShape{size: "medium", format: "ignition", replicas: 1, healthCheck: true}
	f := newFixture(t, sh)
	f.reconciled(t)
	md(t, f.ns, "c-b")

	f.set(t, oneWorker())
	fx.Eventually(t, "MachineDeployment b and its objects gone", wait, func(ctx context.Context) string {
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "c-b"}, &clusterv1.MachineDeployment{})
		if !apierrors.IsNotFound(err) {
			return fmt.Sprintf("MachineDeployment c-b: %v", err)
		}
		err = env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "c-b"}, &clusterv1.MachineHealthCheck{})
		if !apierrors.IsNotFound(err) {
			return fmt.Sprintf("MachineHealthCheck c-b: %v", err)
		}
		b := map[string]string{clusterv1.ClusterTopologyMachineDeploymentNameLabel: "b"}
		if n := len(owned(t, provider.InfraMachineTemplate, f.ns, b)) + len(owned(t, provider.BootstrapConfigTemplate, f.ns, b)); n > 0 {
			return fmt.Sprintf("%d templates of b left", n)
		}
		return ""
	})
	md(t, f.ns, "c-a")
	f.reconciled(t)
}

// TestDeletingTheClusterLeavesNothing: with the Cluster controller's
// deletion and the garbage collector, every object the topology made goes.
func TestDeletingTheClusterLeavesNothing(t *testing.T) {
	f := newFixture(t, twoWorkers())
	f.reconciled(t)
	if err := env.Client.Delete(context.Background(), f.cluster); err != nil {
		t.Fatal(err)
	}
	fx.Eventually(t, "nothing left of the topology", time.Minute, func(ctx context.Context) string {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(f.cluster), &clusterv1.Cluster{}); !apierrors.IsNotFound(err) {
			return fmt.Sprintf("the Cluster is still there (%v)", err)
		}
		var left []string
		for _, k := range []provider.Kind{provider.InfraCluster, provider.ControlPlane, provider.InfraMachineTemplate, provider.BootstrapConfigTemplate} {
			for name := range owned(t, k, f.ns, nil) {
				left = append(left, k.Kind+" "+name)
			}
		}
		mds := &clusterv1.MachineDeploymentList{}
		checks := &clusterv1.MachineHealthCheckList{}
		if err := env.Client.List(ctx, mds, client.InNamespace(f.ns)); err != nil {
			return err.Error()
		}
		if err := env.Client.List(ctx, checks, client.InNamespace(f.ns)); err != nil {
			return err.Error()
		}
		for _, m := range mds.Items {
			left = append(left, "MachineDeployment "+m.Name)
		}
		for _, m := range checks.Items {
			left = append(left, "MachineHealthCheck "+m.Name)
		}
		return fx.Unless(len(left) == 0, fmt.Sprintf("left: %v", left))
	})
}

// TestPausedClusterIsNotTouched: spec.paused holds every change back and
// says so; unpausing applies it.
func TestPausedClusterIsNotTouched(t *testing.T) {
	f := newFixture(t, oneWorker())
	f.reconciled(t)
	if err := env.Client.Patch(context.Background(), f.cluster, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"paused":true}}`))); err != nil {
		t.Fatal(err)
	}
	// The state changes only once the pause is seen: here the test, not
	// the Cluster, holds the topology, and a reconcile already under way
	// would apply it before reading the pause.
	f.condition(t, metav1.ConditionFalse, clusterv1.PausedReason, "spec.paused")
	sh := oneWorker()
	sh.cpReplicas = 3
	f.set(t, sh)
	replicas := func() int64 {
		v, _, _ := unstructured.NestedInt64(getU(t, provider.ControlPlane, f.ns, "c-cp").Object, "spec", "replicas")
		return v
	}
	fx.Consistently(t, "the control plane untouched while paused", time.Second, func(context.Context) string {
		return fx.Unless(replicas() == 1, fmt.Sprintf("replicas %d while paused", replicas()))
	})
	if err := env.Client.Patch(context.Background(), f.cluster, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"paused":false}}`))); err != nil {
		t.Fatal(err)
	}
	fx.Eventually(t, "the change applied once unpaused", wait, func(context.Context) string {
		return fx.Unless(replicas() == 3, fmt.Sprintf("replicas %d", replicas()))
	})
	f.reconciled(t)
}

// TestUnsupportedAndUnreconciledClassesAreReported: a class that needs
// Runtime SDK extensions is refused by name, never half applied; a class
// its controller has not reconciled is waited for.
func TestUnsupportedAndUnreconciledClassesAreReported(t *testing.T) {
	f := newFixture(t, oneWorker(), func(cc *clusterv1.ClusterClass) {
		cc.Spec.Patches = []clusterv1.ClusterClassPatch{{Name: "from-extension", External: &clusterv1.ExternalPatchDefinition{GeneratePatchesExtension: "gen.example"}}}
	})
	f.condition(t, metav1.ConditionFalse, clusterv1.ClusterTopologyReconciledFailedReason, `patch "from-extension" is external`)
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: "c-cp"}, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": provider.ControlPlane.GVK().GroupVersion().String(), "kind": provider.ControlPlane.Kind,
	}}); !apierrors.IsNotFound(err) {
		t.Errorf("the control plane of a refused class: %v, want none", err)
	}

	// The class changes; its controller has not looked at it yet.
	get(t, f.class)
	f.class.Spec.Patches = nil
	if err := env.Client.Update(context.Background(), f.class); err != nil {
		t.Fatal(err)
	}
	f.condition(t, metav1.ConditionFalse, clusterv1.ClusterTopologyReconciledClusterClassNotReconciledReason, "not reconciled yet")
	markReconciled(t, f.class)
	f.reconciled(t)
}

// TestStatusIsSharedWithTheClusterController: the topology's condition and
// upgrade plans stay while the Cluster controller writes its counters and
// version counts to the same status.
func TestStatusIsSharedWithTheClusterController(t *testing.T) {
	sh := oneWorker()
	sh.upgrade = plan.TopologyUpgrade{
		ControlPlaneUpgradePlan: []string{"v1.34.0"}, WorkersUpgradePlan: []string{"v1.34.0"},
		Reason: clusterv1.ClusterTopologyReconciledControlPlaneUpgradePendingReason, Message: "the control plane waits for its upgrade to v1.34.0",
	}
	f := newFixture(t, sh)
	f.condition(t, metav1.ConditionFalse, clusterv1.ClusterTopologyReconciledControlPlaneUpgradePendingReason, "waits for its upgrade")

	// A control plane Machine and the control plane's counters: the
	// Cluster controller's part of the status changes.
	m := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "c-cp-1", Labels: map[string]string{
			clusterv1.ClusterNameLabel: "c", clusterv1.MachineControlPlaneLabel: "",
		}},
		Spec: clusterv1.MachineSpec{
			ClusterName: "c", Version: "v1.33.0",
			Bootstrap:         clusterv1.Bootstrap{DataSecretName: ptr.To("boot")},
			InfrastructureRef: provider.InfraMachine.Ref("c-cp-1"),
		},
	}
	fx.Create(t, env.Client, m)
	if err := provider.SetStatus(context.Background(), env.Client, getU(t, provider.ControlPlane, f.ns, "c-cp"), map[string]any{
		"replicas": int64(1), "readyReplicas": int64(1), "availableReplicas": int64(1), "upToDateReplicas": int64(1),
	}); err != nil {
		t.Fatal(err)
	}
	fx.Eventually(t, "both controllers' status fields side by side", wait, func(ctx context.Context) string {
		c := &clusterv1.Cluster{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(f.cluster), c); err != nil {
			return err.Error()
		}
		cp, w := c.Status.ControlPlane, c.Status.Workers
		switch {
		case cp == nil || ptr.Deref(cp.ReadyReplicas, 0) != 1:
			return fmt.Sprintf("control plane counters %+v", cp)
		case len(cp.Versions) != 1 || cp.Versions[0] != (clusterv1.StatusVersion{Version: "v1.33.0", Replicas: 1}):
			return fmt.Sprintf("control plane versions %+v", cp.Versions)
		case len(cp.UpgradePlan) != 1 || cp.UpgradePlan[0].Version != "v1.34.0":
			return fmt.Sprintf("control plane upgrade plan %+v", cp.UpgradePlan)
		case w == nil || len(w.UpgradePlan) != 1 || w.UpgradePlan[0].Version != "v1.34.0":
			return fmt.Sprintf("workers %+v", w)
		}
		return fx.Condition(c.Status.Conditions, clusterv1.ClusterTopologyReconciledCondition, metav1.ConditionFalse)
	})

	// The upgrade is done: the plans go.
	f.set(t, oneWorker())
	f.reconciled(t)
	get(t, f.cluster)
	c := f.cluster
	if c.Status.ControlPlane.UpgradePlan != nil || c.Status.Workers.UpgradePlan != nil || ptr.Deref(c.Status.ControlPlane.ReadyReplicas, 0) != 1 {
		t.Errorf("status after the upgrade: control plane %+v, workers %+v", c.Status.ControlPlane, c.Status.Workers)
	}
}

// TestMachinePoolsComeAndGo: a topology MachinePool is made with its
// bootstrap config and infrastructure machine pool, which change in place,
// and deleted when the topology drops it.
func TestMachinePoolsComeAndGo(t *testing.T) {
	sh := oneWorker()
	sh.pools = map[string]string{"p": "cloud-config"}
	f := newFixture(t, sh)
	f.reconciled(t)
	mp := &clusterv1.MachinePool{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "c-p"}}
	get(t, mp)
	if mp.Labels[clusterv1.ClusterTopologyMachinePoolNameLabel] != "p" ||
		mp.Spec.Template.Spec.Bootstrap.ConfigRef != provider.BootstrapConfig.Ref("c-p-boot") ||
		mp.Spec.Template.Spec.InfrastructureRef != provider.InfraMachinePool.Ref("c-p-pool") {
		t.Fatalf("MachinePool labels %v, references %+v and %+v", mp.Labels, mp.Spec.Template.Spec.Bootstrap.ConfigRef, mp.Spec.Template.Spec.InfrastructureRef)
	}

	sh.pools["p"] = "ignition"
	f.set(t, sh)
	fx.Eventually(t, "the bootstrap config changed in place", wait, func(context.Context) string {
		got := nestedString(getU(t, provider.BootstrapConfig, f.ns, "c-p-boot"), "spec", "format")
		return fx.Unless(got == "ignition", "format "+got)
	})

	// Dropped, the pool is deleted; its own deletion (the MachinePool
	// controller, not running here) takes its objects down after its
	// Machines.
	f.set(t, oneWorker())
	fx.Eventually(t, "the MachinePool gone", wait, func(ctx context.Context) string {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(mp), &clusterv1.MachinePool{})
		return fx.Unless(apierrors.IsNotFound(err), fmt.Sprintf("MachinePool: %v", err))
	})
	f.reconciled(t)
}

// TestIncompatibleRebaseIsRefusedWithoutAnyChange: a state whose
// infrastructure cluster is of another kind (a class of other kinds) is
// refused by name, and nothing of it is applied.
func TestIncompatibleRebaseIsRefusedWithoutAnyChange(t *testing.T) {
	f := newFixture(t, oneWorker())
	f.reconciled(t)
	sh := oneWorker()
	sh.infraKind = provider.InfraMachinePool
	sh.cpReplicas = 3
	f.set(t, sh)
	f.condition(t, metav1.ConditionFalse, clusterv1.ClusterTopologyReconciledFailedReason, "infrastructure cluster would change from TestCluster."+provider.InfrastructureGroup+" to TestMachinePool")
	replicas, _, _ := unstructured.NestedInt64(getU(t, provider.ControlPlane, f.ns, "c-cp").Object, "spec", "replicas")
	if replicas != 1 {
		t.Errorf("control plane replicas %d: part of a refused state was applied", replicas)
	}
	if n := len(owned(t, provider.InfraMachinePool, f.ns, nil)); n != 0 {
		t.Errorf("%d objects of the new kind made", n)
	}
}

// TestClusterBeforeItsClass: a Cluster whose class does not exist yet waits
// for it, says so, and comes up once it is there.
func TestClusterBeforeItsClass(t *testing.T) {
	f := newFixture(t, oneWorker())
	f.reconciled(t)
	d := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "d"},
		Spec:       *f.cluster.Spec.DeepCopy(),
	}
	d.Spec.Topology.ClassRef.Name = "later"
	d.Spec.InfrastructureRef, d.Spec.ControlPlaneRef = clusterv1.ContractVersionedObjectReference{}, clusterv1.ContractVersionedObjectReference{}
	states.Store(clusterKey(d), build(f.ns, oneWorker()))
	fx.Create(t, env.Client, d)
	g := &fixture{ns: f.ns, cluster: d}
	g.condition(t, metav1.ConditionFalse, clusterv1.ClusterTopologyReconciledClusterClassNotReconciledReason, "ClusterClass "+f.ns+"/later (spec.topology.classRef) does not exist yet")

	later := &clusterv1.ClusterClass{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "later"}, Spec: *f.class.Spec.DeepCopy()}
	fx.Create(t, env.Client, later)
	markReconciled(t, later)
	g.reconciled(t)
	getU(t, provider.ControlPlane, f.ns, "d-cp")
}
