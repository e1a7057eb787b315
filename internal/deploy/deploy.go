// Package deploy describes an installation of Capstan into a Kubernetes
// cluster as plain objects: the CRDs, a namespace, least-privilege RBAC, and
// the manager Deployment. The committed config/deploy/capstan.yaml is
// rendered from it (so `kubectl apply -f` installs Capstan anywhere), and
// the CLI installs the same objects.
package deploy

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/config/crd"
	"capstan.dev/capstan/internal/version"
	"capstan.dev/capstan/internal/webhook"
)

// Names of the installation's objects.
const (
	Namespace   = "capstan-system"
	ManagerName = "capstan-manager"
	// WebhookService is the Service through which the API server reaches
	// the manager's admission webhooks.
	WebhookService = "capstan-webhook-service"
	webhookPort    = 9443
	// metricsPort serves the manager's metrics over HTTPS, to callers the
	// API server authenticates and authorises (MetricsReaderRole).
	metricsPort    = 8443
	DefaultImage   = "ghcr.io/capstan-dev/capstan"
	managerLabel   = "app.kubernetes.io/name"
	managerLabelOf = "capstan-manager"
	// MetricsReaderRole grants GET /metrics: bind it to whatever scrapes
	// the manager (the manager checks each request with the API server).
	MetricsReaderRole = "capstan-metrics-reader"
	// AggregateToManagerLabel is the label a provider puts on a ClusterRole
	// that grants access to its kinds; the manager's role aggregates every
	// such role, as Cluster API providers expect.
	AggregateToManagerLabel = "cluster.x-k8s.io/aggregate-to-manager"
)

// VersionAnnotation on the namespace and the manager Deployment records
// which Capstan version is installed (an annotation, since versions such as
// v1.2.3+meta are not valid label values).
const VersionAnnotation = "capstan.dev/version"

// Options choose what to install.
type Options struct {
	// Image is the manager's container image, with its tag; empty, it is
	// Capstan's image at the running binary's own version (never a moving
	// tag such as latest, which would pull a manager other than the one
	// these CRDs and RBAC were made for).
	Image string
	// Version, when set, is recorded in VersionAnnotation.
	Version string
	// LocalDir, when set, makes the manager run the local infrastructure
	// provider with its machines under this host directory. The directory
	// is mounted from the host at the same path, and the manager serves no
	// metrics or probes: on a local provider's machine the Pod is a process
	// of this host, where fixed ports would clash with anything else.
	LocalDir string
}

// Image is the manager image of a Capstan version.
func Image(version string) string { return DefaultImage + ":" + version }

// IsCapstanImage reports whether image is Capstan's own, whatever its tag
// or digest: the local provider's machines run such containers as real
// processes of the capstan binary.
func IsCapstanImage(image string) bool {
	repo := image
	if i := strings.Index(repo, "@"); i >= 0 {
		repo = repo[:i]
	}
	// A tag follows the last colon that comes after the last slash (a colon
	// before it belongs to a registry port).
	if i := strings.LastIndex(repo, ":"); i > strings.LastIndex(repo, "/") {
		repo = repo[:i]
	}
	return repo == DefaultImage
}

// Objects returns everything an installation consists of, in the order to
// apply it.
func Objects(o Options) ([]client.Object, error) {
	crds, err := crd.All()
	if err != nil {
		return nil, err
	}
	var objs []client.Object
	var annotations map[string]string
	if o.Version != "" {
		annotations = map[string]string{VersionAnnotation: o.Version}
	}
	for _, c := range crds {
		c.APIVersion, c.Kind = "apiextensions.k8s.io/v1", "CustomResourceDefinition"
		objs = append(objs, c)
	}
	labels := map[string]string{managerLabel: managerLabelOf}
	objs = append(objs,
		&corev1.Namespace{TypeMeta: typeMeta("v1", "Namespace"), ObjectMeta: metav1.ObjectMeta{Name: Namespace, Annotations: annotations}},
		&corev1.ServiceAccount{TypeMeta: typeMeta("v1", "ServiceAccount"), ObjectMeta: metav1.ObjectMeta{Name: ManagerName, Namespace: Namespace}},
		&rbacv1.ClusterRole{
			TypeMeta:   typeMeta("rbac.authorization.k8s.io/v1", "ClusterRole"),
			ObjectMeta: metav1.ObjectMeta{Name: ManagerName},
			AggregationRule: &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{
				{MatchLabels: map[string]string{AggregateToManagerLabel: "true"}},
			}},
		},
		&rbacv1.ClusterRole{
			TypeMeta:   typeMeta("rbac.authorization.k8s.io/v1", "ClusterRole"),
			ObjectMeta: metav1.ObjectMeta{Name: ManagerName + "-core", Labels: map[string]string{AggregateToManagerLabel: "true"}},
			Rules:      managerRules(crds),
		},
		&rbacv1.ClusterRole{
			TypeMeta:   typeMeta("rbac.authorization.k8s.io/v1", "ClusterRole"),
			ObjectMeta: metav1.ObjectMeta{Name: ManagerName + "-local-provider", Labels: map[string]string{AggregateToManagerLabel: "true"}},
			Rules:      providerRules(crds, "infrastructure-local"),
		},
		&rbacv1.ClusterRole{
			TypeMeta:   typeMeta("rbac.authorization.k8s.io/v1", "ClusterRole"),
			ObjectMeta: metav1.ObjectMeta{Name: ManagerName + "-inmemory-provider", Labels: map[string]string{AggregateToManagerLabel: "true"}},
			Rules:      providerRules(crds, "infrastructure-inmemory"),
		},
		&rbacv1.ClusterRole{
			TypeMeta:   typeMeta("rbac.authorization.k8s.io/v1", "ClusterRole"),
			ObjectMeta: metav1.ObjectMeta{Name: ManagerName + "-qemu-provider", Labels: map[string]string{AggregateToManagerLabel: "true"}},
			Rules:      providerRules(crds, "infrastructure-qemu"),
		},
		&rbacv1.ClusterRole{
			TypeMeta:   typeMeta("rbac.authorization.k8s.io/v1", "ClusterRole"),
			ObjectMeta: metav1.ObjectMeta{Name: MetricsReaderRole},
			Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}},
		},
		&rbacv1.ClusterRoleBinding{
			TypeMeta:   typeMeta("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
			ObjectMeta: metav1.ObjectMeta{Name: ManagerName},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: ManagerName},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: ManagerName, Namespace: Namespace}},
		},
		&rbacv1.Role{
			TypeMeta:   typeMeta("rbac.authorization.k8s.io/v1", "Role"),
			ObjectMeta: metav1.ObjectMeta{Name: ManagerName + "-leader-election", Namespace: Namespace},
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
			},
		},
		&rbacv1.RoleBinding{
			TypeMeta:   typeMeta("rbac.authorization.k8s.io/v1", "RoleBinding"),
			ObjectMeta: metav1.ObjectMeta{Name: ManagerName + "-leader-election", Namespace: Namespace},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: ManagerName + "-leader-election"},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: ManagerName, Namespace: Namespace}},
		},
	)
	// Shipped without webhooks, so nothing is sent to a manager that does
	// not serve yet; the manager writes them once it does.
	objs = append(objs, webhook.Configurations()...)
	objs = append(objs, managerDeployment(o, labels, annotations))
	if o.LocalDir == "" {
		// A manager on a local provider's machine is a process of the API
		// server's host and is reached on loopback; elsewhere through a
		// Service.
		objs = append(objs, &corev1.Service{
			TypeMeta:   typeMeta("v1", "Service"),
			ObjectMeta: metav1.ObjectMeta{Name: WebhookService, Namespace: Namespace},
			Spec: corev1.ServiceSpec{
				Selector: labels,
				Ports:    []corev1.ServicePort{{Name: "webhook", Port: 443, TargetPort: intstr.FromString("webhook"), Protocol: corev1.ProtocolTCP}},
			},
		})
	}
	return objs, nil
}

// managerGroups are the API groups of the kinds Capstan's manager itself
// serves the contract of: Cluster API's core, add-ons, and the kubeadm
// bootstrap and control-plane providers it runs.
var managerGroups = []string{"cluster.x-k8s.io", "addons.cluster.x-k8s.io", "bootstrap.cluster.x-k8s.io", "controlplane.cluster.x-k8s.io"}

// managerRules are the manager's rights: each of its own kinds by name
// (from the CRDs, so a new kind cannot be forgotten), and only what it needs
// of Kubernetes' built-in ones. Infrastructure providers' kinds, Capstan's
// own included, come through aggregation.
func managerRules(crds []*apiextensionsv1.CustomResourceDefinition) []rbacv1.PolicyRule {
	own := kindRules(crds, func(c *apiextensionsv1.CustomResourceDefinition) bool {
		return slices.Contains(managerGroups, c.Spec.Group)
	})
	return append(own,
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
		rbacv1.PolicyRule{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch", "update"}},
		rbacv1.PolicyRule{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"get", "list", "watch"}},
		// Metrics served off loopback ask the API server who a caller is
		// and whether it may read them.
		rbacv1.PolicyRule{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}},
		rbacv1.PolicyRule{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"subjectaccessreviews"}, Verbs: []string{"create"}},
		// The admission webhooks: the manager fills in its own two
		// configurations, which the installation ships (their webhooks and
		// caBundle follow its certificate and endpoint), and checks its
		// namespace. By name only, and no create: a webhook configuration
		// sees, and may change, whatever objects it names, so a manager that
		// could make or rewrite others could intercept any object.
		rbacv1.PolicyRule{APIGroups: []string{"admissionregistration.k8s.io"}, Resources: []string{"validatingwebhookconfigurations"},
			ResourceNames: []string{webhook.ValidatingConfigurationName}, Verbs: []string{"get", "update", "patch"}},
		rbacv1.PolicyRule{APIGroups: []string{"admissionregistration.k8s.io"}, Resources: []string{"mutatingwebhookconfigurations"},
			ResourceNames: []string{webhook.MutatingConfigurationName}, Verbs: []string{"get", "update", "patch"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get"}},
	)
}

// providerRules are the rights of one of Capstan's own infrastructure
// providers, aggregated into the manager's role like any provider's: every
// kind whose CRD carries the provider's label.
func providerRules(crds []*apiextensionsv1.CustomResourceDefinition, provider string) []rbacv1.PolicyRule {
	return kindRules(crds, func(c *apiextensionsv1.CustomResourceDefinition) bool {
		return c.Labels[clusterv1.ProviderNameLabel] == provider
	})
}

// kindRules grant full control of the kinds of the chosen CRDs, each named
// with its status (when it has one) and finalizers subresources; one rule
// per API group, so that no resource name is granted in another group.
func kindRules(crds []*apiextensionsv1.CustomResourceDefinition, chosen func(*apiextensionsv1.CustomResourceDefinition) bool) []rbacv1.PolicyRule {
	var rules []rbacv1.PolicyRule
	for _, c := range crds {
		if !chosen(c) {
			continue
		}
		i := slices.IndexFunc(rules, func(r rbacv1.PolicyRule) bool { return r.APIGroups[0] == c.Spec.Group })
		if i < 0 {
			rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{c.Spec.Group}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}})
			i = len(rules) - 1
		}
		plural := c.Spec.Names.Plural
		rules[i].Resources = append(rules[i].Resources, plural, plural+"/finalizers")
		if slices.ContainsFunc(c.Spec.Versions, func(v apiextensionsv1.CustomResourceDefinitionVersion) bool {
			return v.Subresources != nil && v.Subresources.Status != nil
		}) {
			rules[i].Resources = append(rules[i].Resources, plural+"/status")
		}
	}
	return rules
}

func managerDeployment(o Options, labels, annotations map[string]string) *appsv1.Deployment {
	image := o.Image
	if image == "" {
		image = Image(version.Version)
	}
	probe := func(path string) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromString("health")}}}
	}
	// The leader election namespace is explicit: outside a real container
	// there is no service account namespace file to learn it from.
	c := corev1.Container{
		Name:  "manager",
		Image: image,
		Args: []string{"manager", "--leader-elect", "--leader-election-namespace=" + Namespace, "--metrics-bind-address=:" + strconv.Itoa(metricsPort), "--health-probe-bind-address=:9440",
			fmt.Sprintf("--webhook-bind-address=:%d", webhookPort), "--webhook-service=" + WebhookService, "--webhook-namespace=" + Namespace},
		LivenessProbe:  probe("/healthz"),
		ReadinessProbe: probe("/readyz"),
		Ports: []corev1.ContainerPort{
			{Name: "metrics", ContainerPort: metricsPort, Protocol: corev1.ProtocolTCP},
			{Name: "health", ContainerPort: 9440, Protocol: corev1.ProtocolTCP},
			{Name: "webhook", ContainerPort: webhookPort, Protocol: corev1.ProtocolTCP},
		},
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr.To(false),
			ReadOnlyRootFilesystem:   ptr.To(true),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		},
	}
	var volumes []corev1.Volume
	if o.LocalDir != "" {
		c.Args = localManagerArgs(o.LocalDir)
		c.Ports, c.LivenessProbe, c.ReadinessProbe = nil, nil, nil
		c.VolumeMounts = []corev1.VolumeMount{{Name: "local-machines", MountPath: o.LocalDir}}
		volumes = []corev1.Volume{{Name: "local-machines", VolumeSource: corev1.VolumeSource{
			HostPath: &corev1.HostPathVolumeSource{Path: o.LocalDir, Type: ptr.To(corev1.HostPathDirectoryOrCreate)},
		}}}
	}
	return &appsv1.Deployment{
		TypeMeta:   typeMeta("apps/v1", "Deployment"),
		ObjectMeta: metav1.ObjectMeta{Name: ManagerName, Namespace: Namespace, Labels: labels, Annotations: annotations},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					ServiceAccountName:            ManagerName,
					TerminationGracePeriodSeconds: ptr.To(int64(10)),
					SecurityContext:               &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
					Containers:                    []corev1.Container{c},
					Volumes:                       volumes,
				},
			},
		},
	}
}

func typeMeta(apiVersion, kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: apiVersion, Kind: kind}
}

// YAML renders the objects as one multi-document YAML stream.
func YAML(objs []client.Object) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteString("# Capstan: CRDs, RBAC and the manager. Generated by `go run ./hack/deploy`; do not edit.\n")
	for _, obj := range objs {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			return nil, err
		}
		// What the server fills in has no place in a manifest.
		delete(m, "status")
		unstructured.RemoveNestedField(m, "metadata", "creationTimestamp")
		unstructured.RemoveNestedField(m, "spec", "template", "metadata", "creationTimestamp")
		body, err := yaml.Marshal(m)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), err)
		}
		buf.WriteString("---\n")
		buf.Write(body)
	}
	return buf.Bytes(), nil
}
