package webhook_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/url"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/manager"
	"capstan.dev/capstan/internal/webhook"
	fx "capstan.dev/capstan/test/fixture"
)

const timeout = 30 * time.Second

// readyClass creates the tests' quick-start class and its templates in ns,
// edited by edit when set, and waits until the controller has gathered its
// variables (the webhooks check Clusters against them).
func readyClass(t *testing.T, ns string, edit func(*clusterv1.ClusterClass)) *clusterv1.ClusterClass {
	t.Helper()
	cc, templates := fx.QuickStartClass(t, ns)
	if edit != nil {
		edit(cc)
	}
	for _, o := range templates {
		fx.Create(t, env.Client, o)
	}
	fx.Create(t, env.Client, cc)
	fx.Eventually(t, "class reconciled", timeout, func(ctx context.Context) string {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cc), cc); err != nil {
			return err.Error()
		}
		if cc.Status.ObservedGeneration != cc.Generation {
			return "status of an older generation"
		}
		return fx.Condition(cc.Status.Conditions, clusterv1.ClusterClassVariablesReadyCondition, metav1.ConditionTrue)
	})
	return cc
}

// topologyCluster is a Cluster of the quick-start class with one
// MachineDeployment.
func topologyCluster(ns, name string, vars ...clusterv1.ClusterVariable) *clusterv1.Cluster {
	c := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	c.Spec.Topology.ClassRef.Name = "quick-start"
	c.Spec.Topology.Version = "v1.33.1"
	c.Spec.Topology.Workers.MachineDeployments = []clusterv1.MachineDeploymentTopology{{Name: "md-0", Class: "default-worker"}}
	c.Spec.Topology.Variables = vars
	return c
}

func variable(name, value string) clusterv1.ClusterVariable {
	return clusterv1.ClusterVariable{Name: name, Value: apiextensionsv1.JSON{Raw: []byte(value)}}
}

// refused checks that err is the API server's refusal, through the webhook
// hook, with every one of wants in its message.
func refused(t *testing.T, err error, hook string, wants ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("accepted; want a refusal by %s saying %q", hook, wants)
	}
	msg := err.Error()
	if !strings.Contains(msg, `admission webhook "`+hook+`" denied the request`) {
		t.Fatalf("refusal %q does not come from webhook %s", msg, hook)
	}
	for _, w := range wants {
		if !strings.Contains(msg, w) {
			t.Errorf("refusal %q\nlacks %q", msg, w)
		}
	}
}

// update reads obj afresh, lets change edit it and writes it, again when
// a controller wrote it in between; it returns the write's error.
func update[T client.Object](t *testing.T, obj T, change func(T)) error {
	t.Helper()
	return updateVia(t, env.Client, obj, change)
}

// updateVia is update, writing through c.
func updateVia[T client.Object](t *testing.T, c client.Client, obj T, change func(T)) error {
	t.Helper()
	ctx := context.Background()
	for {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			t.Fatal(err)
		}
		change(obj)
		if err := c.Update(ctx, obj); !apierrors.IsConflict(err) {
			return err
		}
	}
}

func TestClusterVariablesAreDefaultedAndChecked(t *testing.T) {
	ns := env.Namespace(t)
	readyClass(t, ns, nil)
	ctx := context.Background()

	// Defaults: a required variable with a default is added, an object
	// value gets the defaults of its fields, a version without "v" is
	// tolerated.
	c := topologyCluster(ns, "defaulted", variable("podSecurityStandard", `{}`))
	c.Spec.Topology.Version = "1.33.1"
	fx.Create(t, env.Client, c)
	got := &clusterv1.Cluster{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(c), got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.Topology.Version != "v1.33.1" {
		t.Errorf("version = %q, want v1.33.1", got.Spec.Topology.Version)
	}
	values := map[string]string{}
	for _, v := range got.Spec.Topology.Variables {
		values[v.Name] = string(v.Value.Raw)
	}
	if values["imageRepository"] != `"registry.k8s.io"` || values["podSecurityStandard"] != `{"enabled":true,"enforce":"baseline"}` {
		t.Errorf("variables after defaulting: %v", values)
	}

	// Bad values are refused naming the variable and the rule.
	err := env.Client.Create(ctx, topologyCluster(ns, "too-verbose", variable("kubeletLogLevel", `11`)))
	refused(t, err, "default.cluster.capstan.dev", "spec.topology.variables[0].value", `variable "kubeletLogLevel"`, "less than or equal to 10")

	err = env.Client.Create(ctx, topologyCluster(ns, "privileged", variable("podSecurityStandard", `{"enforce":"privileged"}`)))
	refused(t, err, "default.cluster.capstan.dev", "spec.topology.variables[0].value", `variable "podSecurityStandard"`, "an enabled pod security standard cannot enforce privileged")

	err = env.Client.Create(ctx, topologyCluster(ns, "unknown", variable("nosuch", `1`)))
	refused(t, err, "default.cluster.capstan.dev", "nosuch")

	// An override is checked like a value.
	bad := topologyCluster(ns, "bad-override")
	bad.Spec.Topology.Workers.MachineDeployments[0].Variables.Overrides = []clusterv1.ClusterVariable{variable("kubeletLogLevel", `-1`)}
	refused(t, env.Client.Create(ctx, bad), "default.cluster.capstan.dev", "spec.topology.workers.machineDeployments[0].variables.overrides[0].value", `variable "kubeletLogLevel"`)

	// Updates are checked too.
	err = update(t, got, func(c *clusterv1.Cluster) {
		c.Spec.Topology.Variables = append(c.Spec.Topology.Variables, variable("kubeletLogLevel", `"loud"`))
	})
	refused(t, err, "default.cluster.capstan.dev", "kubeletLogLevel")
}

func TestClusterTopologyRefusals(t *testing.T) {
	ns := env.Namespace(t)
	readyClass(t, ns, nil)
	ctx := context.Background()

	// A class that does not exist (yet) is not a refusal: the Cluster waits.
	fx.Create(t, env.Client, func() *clusterv1.Cluster {
		c := topologyCluster(ns, "waits")
		c.Spec.Topology.ClassRef.Name = "later"
		return c
	}())

	c := topologyCluster(ns, "wrong-class")
	c.Spec.Topology.Workers.MachineDeployments[0].Class = "gpu"
	refused(t, env.Client.Create(ctx, c), "validation.cluster.capstan.dev",
		`spec.topology.workers.machineDeployments[md-0].class: Invalid value: "gpu": ClusterClass `+ns+`/quick-start has no machineDeployments class of this name: use one of ["default-worker", "big-worker"]`)

	c = topologyCluster(ns, "wrong-pool")
	c.Spec.Topology.Workers.MachinePools = []clusterv1.MachinePoolTopology{{Name: "mp-0", Class: "nosuch"}}
	refused(t, env.Client.Create(ctx, c), "validation.cluster.capstan.dev", "spec.topology.workers.machinePools[mp-0].class")

	c = topologyCluster(ns, "concurrency")
	c.Annotations = map[string]string{clusterv1.ClusterTopologyUpgradeConcurrencyAnnotation: "0"}
	refused(t, env.Client.Create(ctx, c), "validation.cluster.capstan.dev", "metadata.annotations[topology.cluster.x-k8s.io/upgrade-concurrency]", "at least 1")

	ok := topologyCluster(ns, "ok")
	fx.Create(t, env.Client, ok)
	refused(t, update(t, ok, func(c *clusterv1.Cluster) { c.Spec.Topology.Version = "v1.32.9" }),
		"validation.cluster.capstan.dev", "spec.topology.version", "cannot be lowered from v1.33.1")
	refused(t, update(t, ok, func(c *clusterv1.Cluster) { c.Spec.Topology.Version = "v1.35.0" }),
		"validation.cluster.capstan.dev", "spec.topology.version", "upgrade to v1.34.x first")
	// (An upgrade that is allowed: TestVersionChangeWaitsForThePreviousUpgrade.)

	// The topology and the cluster autoscaler cannot both own replicas.
	c = topologyCluster(ns, "autoscaled")
	c.Spec.Topology.Workers.MachineDeployments[0].Replicas = ptr.To(int32(2))
	c.Spec.Topology.Workers.MachineDeployments[0].Metadata.Annotations = map[string]string{clusterv1.AutoscalerMinSizeAnnotation: "1"}
	refused(t, env.Client.Create(ctx, c), "validation.cluster.capstan.dev",
		"spec.topology.workers.machineDeployments[md-0].replicas: Invalid value: 2: cannot be set while the topology's metadata carries the annotation "+clusterv1.AutoscalerMinSizeAnnotation)

	// A Cluster without a topology never meets the webhooks.
	plain := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "plain"}}
	plain.Spec.InfrastructureRef = clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "LocalCluster", Name: "plain"}
	fx.Create(t, env.Client, plain)
	refused(t, update(t, plain, func(c *clusterv1.Cluster) { c.Spec.Topology = topologyCluster(ns, "x").Spec.Topology }),
		"validation.cluster.capstan.dev", "spec.topology.classRef: Forbidden: cannot be set on an existing Cluster that was created without a topology")
}

func TestClassInUseKeepsWhatItsClustersUse(t *testing.T) {
	ns := env.Namespace(t)
	cc := readyClass(t, ns, nil)
	ctx := context.Background()
	big := topologyCluster(ns, "big", variable("kubeletLogLevel", `4`))
	big.Spec.Topology.Workers.MachineDeployments[0].Class = "big-worker"
	big.Spec.Topology.Workers.MachineDeployments[0].Replicas = ptr.To(int32(1))
	small := topologyCluster(ns, "small")
	small.Spec.Topology.Workers.MachineDeployments[0].HealthCheck.Enabled = ptr.To(true)
	fx.Create(t, env.Client, big, small)

	// The class's cache must hold both Clusters before it can refuse.
	fx.Eventually(t, "removing big-worker refused", timeout, func(context.Context) string {
		err := update(t, cc, func(cc *clusterv1.ClusterClass) {
			cc.Spec.Workers.MachineDeployments = cc.Spec.Workers.MachineDeployments[:1]
		})
		return fx.Unless(err != nil, "removing a class in use was accepted")
	})
	err := update(t, cc, func(cc *clusterv1.ClusterClass) {
		cc.Spec.Workers.MachineDeployments = cc.Spec.Workers.MachineDeployments[:1]
	})
	refused(t, err, "validation.clusterclass.capstan.dev",
		`spec.workers.machineDeployments: Forbidden: machineDeployments class "big-worker" cannot be removed: Cluster(s) `+ns+`/big use it`)

	err = update(t, cc, func(cc *clusterv1.ClusterClass) { cc.Spec.Variables = cc.Spec.Variables[:1] })
	refused(t, err, "validation.clusterclass.capstan.dev", `spec.variables: Forbidden: variable "kubeletLogLevel" cannot be removed: Cluster(s) `+ns+`/big use it`)
	// imageRepository was defaulted into both Clusters.
	err = update(t, cc, func(cc *clusterv1.ClusterClass) { cc.Spec.Variables = cc.Spec.Variables[1:] })
	refused(t, err, "validation.clusterclass.capstan.dev", `variable "imageRepository" cannot be removed: Cluster(s) `+ns+`/big, `+ns+`/small use it`)

	// A health check a Cluster turns on without checks of its own cannot
	// be taken from the class; changing it can.
	err = update(t, cc, func(cc *clusterv1.ClusterClass) {
		cc.Spec.Workers.MachineDeployments[0].HealthCheck = clusterv1.MachineDeploymentClassHealthCheck{}
	})
	refused(t, err, "validation.clusterclass.capstan.dev",
		"spec.workers.machineDeployments[default-worker].healthCheck: Forbidden: cannot be removed: Cluster(s) "+ns+"/small turn it on")
	if err := update(t, cc, func(cc *clusterv1.ClusterClass) {
		cc.Spec.Workers.MachineDeployments[0].HealthCheck.Checks.NodeStartupTimeoutSeconds = ptr.To(int32(1200))
	}); err != nil {
		t.Errorf("changing a health check in use was refused: %v", err)
	}

	// A class cannot hand the replicas to the autoscaler while a Cluster sets them.
	err = update(t, cc, func(cc *clusterv1.ClusterClass) {
		cc.Spec.Workers.MachineDeployments[1].Metadata.Annotations = map[string]string{clusterv1.AutoscalerMaxSizeAnnotation: "5"}
	})
	refused(t, err, "validation.clusterclass.capstan.dev",
		"spec.workers.machineDeployments[big-worker].metadata.annotations["+clusterv1.AutoscalerMaxSizeAnnotation+"]: Forbidden: cannot be set while Cluster(s) "+ns+"/big set the replicas")

	// What no Cluster uses can go.
	if err := update(t, cc, func(cc *clusterv1.ClusterClass) { cc.Spec.Workers.MachinePools = nil }); err != nil {
		t.Errorf("removing an unused machinePools class was refused: %v", err)
	}

	// Kinds the Clusters' objects could not follow: neither the class nor a
	// Cluster moved to another class may change them.
	err = update(t, cc, func(cc *clusterv1.ClusterClass) { cc.Spec.Infrastructure.TemplateRef.Kind = "OtherClusterTemplate" })
	refused(t, err, "validation.clusterclass.capstan.dev", `spec.infrastructure.templateRef.kind: Forbidden: cannot change from "LocalClusterTemplate" to "OtherClusterTemplate"`)
	other, _ := fx.QuickStartClass(t, ns)
	other.Name = "other"
	other.Spec.ControlPlane.TemplateRef.Kind = "OtherControlPlaneTemplate"
	other.Spec.Patches = nil // they select the old kind
	fx.Create(t, env.Client, other)
	err = update(t, small, func(c *clusterv1.Cluster) { c.Spec.Topology.ClassRef.Name = "other" })
	refused(t, err, "validation.cluster.capstan.dev",
		"spec.topology.classRef: Forbidden: cannot move from ClusterClass "+ns+"/quick-start to "+ns+`/other: spec.controlPlane.templateRef.kind: Forbidden: cannot change from "KubeadmControlPlaneTemplate" to "OtherControlPlaneTemplate"`)

	err = env.Client.Delete(ctx, cc)
	refused(t, err, "validation.clusterclass.capstan.dev", "it is used by Cluster(s) "+ns+"/big, "+ns+"/small: delete those Clusters or move them to another class first")
	if !apierrors.IsForbidden(err) {
		t.Errorf("deleting a class in use: %v, want Forbidden", err)
	}
}

// A class made stricter after a Cluster was admitted does not block the
// Cluster's other writes; a change of its variables meets the new rules.
func TestStricterClassDoesNotBlockOtherWrites(t *testing.T) {
	ns := env.Namespace(t)
	cc := readyClass(t, ns, nil)
	c := topologyCluster(ns, "loud", variable("kubeletLogLevel", `8`))
	fx.Create(t, env.Client, c)
	if err := update(t, cc, func(cc *clusterv1.ClusterClass) {
		cc.Spec.Variables[1].Schema.OpenAPIV3Schema.Maximum = ptr.To(int64(5))
	}); err != nil {
		t.Fatal(err)
	}
	fx.Eventually(t, "the stricter class reconciled", timeout, func(ctx context.Context) string {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cc), cc); err != nil {
			return err.Error()
		}
		return fx.Unless(cc.Status.ObservedGeneration == cc.Generation && len(cc.Status.Variables) > 1 &&
			ptr.Deref(cc.Status.Variables[1].Definitions[0].Schema.OpenAPIV3Schema.Maximum, 0) == 5, "status.variables not yet the stricter ones")
	})
	if err := update(t, c, func(c *clusterv1.Cluster) { c.Labels = map[string]string{"team": "a"} }); err != nil {
		t.Errorf("a label change was refused because of a value the class no longer allows: %v", err)
	}
	err := update(t, c, func(c *clusterv1.Cluster) {
		c.Spec.Topology.Variables = append(c.Spec.Topology.Variables, variable("podSecurityStandard", `{}`))
	})
	refused(t, err, "default.cluster.capstan.dev", `variable "kubeletLogLevel"`, "less than or equal to 5")
}

// A manager whose cache holds only some objects (--watch-filter) still
// answers for the whole cluster: a class used by a Cluster outside its
// filter cannot be deleted.
func TestFilteredManagerSeesEveryClusterOfAClass(t *testing.T) {
	stopManager()
	if err := startManager(func(o *manager.Options) { o.WatchFilter = "team-a" }); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stopManager()
		if err := startManager(); err != nil {
			t.Fatalf("restarting the manager: %v", err)
		}
	}()
	ns := env.Namespace(t)
	cc := readyClass(t, ns, func(cc *clusterv1.ClusterClass) {
		cc.Labels = map[string]string{manager.WatchFilterLabel: "team-a"}
	})
	fx.Create(t, env.Client, topologyCluster(ns, "unfiltered"))
	err := env.Client.Delete(context.Background(), cc)
	refused(t, err, "validation.clusterclass.capstan.dev", "it is used by Cluster(s) "+ns+"/unfiltered")
}

func TestBrokenDefinitionIsRefusedAtTheDoor(t *testing.T) {
	ns := env.Namespace(t)
	cc, _ := fx.QuickStartClass(t, ns)
	cc.Spec.Variables[1].Schema.OpenAPIV3Schema.Default = &apiextensionsv1.JSON{Raw: []byte(`11`)}
	refused(t, env.Client.Create(context.Background(), cc), "validation.clusterclass.capstan.dev", "spec.variables[1]")
}

// TestBrokenPatchIsRefusedAtTheDoor: a patch taking its value from a
// variable the class does not define never reaches a Cluster.
// TestClassShapeIsCheckedAtTheDoor: what a class's schema cannot see —
// the chain of its kubernetesVersions, that its references are templates.
func TestClassShapeIsCheckedAtTheDoor(t *testing.T) {
	ns := env.Namespace(t)
	cc, _ := fx.QuickStartClass(t, ns)
	cc.Spec.KubernetesVersions = []string{"v1.32.4", "v1.34.0"}
	cc.Spec.Infrastructure.TemplateRef.Kind = "LocalCluster"
	refused(t, env.Client.Create(context.Background(), cc), "validation.clusterclass.capstan.dev",
		`spec.kubernetesVersions[1]: Invalid value: "v1.34.0": skips a minor version after v1.32.4`,
		`spec.infrastructure.templateRef.kind: Invalid value: "LocalCluster": must be a template kind`)
}

func TestBrokenPatchIsRefusedAtTheDoor(t *testing.T) {
	ns := env.Namespace(t)
	cc, _ := fx.QuickStartClass(t, ns)
	if len(cc.Spec.Patches) == 0 || len(cc.Spec.Patches[0].Definitions) == 0 || len(cc.Spec.Patches[0].Definitions[0].JSONPatches) == 0 {
		t.Fatal("the quick-start class has no inline patch to break")
	}
	jp := &cc.Spec.Patches[0].Definitions[0].JSONPatches[0]
	jp.Op, jp.Value = "add", nil
	jp.ValueFrom = &clusterv1.JSONPatchValue{Variable: "noSuchVariable"}
	refused(t, env.Client.Create(context.Background(), cc), "validation.clusterclass.capstan.dev",
		"spec.patches[0].definitions[0].jsonPatches[0]", "noSuchVariable")
}

// servedCertificate dials the webhook server where the configuration says
// the API server reaches it and returns the certificate it serves.
func servedCertificate(ctx context.Context) (*x509.Certificate, error) {
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: webhook.ValidatingConfigurationName}, cfg); err != nil {
		return nil, err
	}
	u, err := url.Parse(*cfg.Webhooks[0].ClientConfig.URL)
	if err != nil {
		return nil, err
	}
	conn, err := tls.Dial("tcp", u.Host, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // only reads the served certificate
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0], nil
}

func TestRenewedAuthorityIsStillTrusted(t *testing.T) {
	ns := env.Namespace(t)
	readyClass(t, ns, nil)
	ctx := context.Background()
	first, err := servedCertificate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	fx.Eventually(t, "a certificate of a new authority served", time.Minute, func(ctx context.Context) string {
		cert, err := servedCertificate(ctx)
		if err != nil {
			return err.Error()
		}
		return fx.Unless(!bytes.Equal(cert.AuthorityKeyId, first.AuthorityKeyId), "still serving a certificate of the first authority")
	})
	// The API server trusts what is served now: the webhook still refuses,
	// and still admits.
	err = env.Client.Create(ctx, topologyCluster(ns, "after-renewal", variable("kubeletLogLevel", `11`)))
	refused(t, err, "default.cluster.capstan.dev", "kubeletLogLevel")
	fx.Create(t, env.Client, topologyCluster(ns, "accepted-after-renewal"))
}

func TestWebhookDownIsAClearRefusal(t *testing.T) {
	ns := env.Namespace(t)
	readyClass(t, ns, nil)
	ctx := context.Background()
	stopManager()
	defer func() {
		if err := startManager(); err != nil {
			t.Fatalf("restarting the manager: %v", err)
		}
	}()
	err := env.Client.Create(ctx, topologyCluster(ns, "nobody-serves"))
	if err == nil {
		t.Fatal("a topology Cluster was admitted while no webhook served")
	}
	for _, want := range []string{`failed calling webhook "default.cluster.capstan.dev"`, "connect: connection refused"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q lacks %q", err, want)
		}
	}
	// Clusters without a topology do not depend on the webhook.
	plain := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "plain"}}
	plain.Spec.InfrastructureRef = clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "LocalCluster", Name: "plain"}
	if err := env.Client.Create(ctx, plain); err != nil {
		t.Errorf("a Cluster without a topology was refused while the webhook was down: %v", err)
	}
}
