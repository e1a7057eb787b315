package webhook

import (
	"context"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

// Names of Capstan's webhook configurations. They are Capstan's alone: the
// server rewrites them whole whenever they differ from what it serves.
const (
	ValidatingConfigurationName = "capstan-validating-webhook-configuration"
	MutatingConfigurationName   = "capstan-mutating-webhook-configuration"
)

// Paths the server handles, one per kind and purpose.
const (
	ClusterDefaultPath       = "/mutate-cluster-x-k8s-io-v1beta2-cluster"
	ClusterValidatePath      = "/validate-cluster-x-k8s-io-v1beta2-cluster"
	ClusterClassValidatePath = "/validate-cluster-x-k8s-io-v1beta2-clusterclass"
)

// Webhook names inside the configurations.
const (
	clusterDefaultName       = "default.cluster.capstan.dev"
	clusterValidateName      = "validation.cluster.capstan.dev"
	clusterClassValidateName = "validation.clusterclass.capstan.dev"
)

// Only Clusters with a topology are sent to the Cluster webhooks (and, on
// update, those that had one: removing it is refused). A Cluster without
// one never waits on the webhook, so even while the manager is down every
// other Cluster is admitted as before. Each step is tested before it is
// read (the old object of a create is null, an empty spec is absent): an
// expression that fails to evaluate would refuse the request.
const (
	hasTopology    = `object != null && has(object.spec) && has(object.spec.topology)`
	hadOrHasTopolo = `(` + hasTopology + `) || (oldObject != null && has(oldObject.spec) && has(oldObject.spec.topology))`
)

// endpoint is how the API server reaches the server: a URL base, or a
// Service.
type endpoint struct {
	url     string // https://host:port, without a path
	service *admissionregistrationv1.ServiceReference
}

func (e endpoint) clientConfig(path string, caBundle []byte) admissionregistrationv1.WebhookClientConfig {
	cc := admissionregistrationv1.WebhookClientConfig{CABundle: caBundle}
	if e.service != nil {
		svc := *e.service
		svc.Path = ptr.To(path)
		cc.Service = &svc
	} else {
		cc.URL = ptr.To(e.url + path)
	}
	return cc
}

func rule(resource string, ops ...admissionregistrationv1.OperationType) []admissionregistrationv1.RuleWithOperations {
	return []admissionregistrationv1.RuleWithOperations{{
		Operations: ops,
		Rule: admissionregistrationv1.Rule{
			APIGroups: []string{clusterv1.GroupVersion.Group}, APIVersions: []string{clusterv1.GroupVersion.Version},
			Resources: []string{resource}, Scope: ptr.To(admissionregistrationv1.AllScopes),
		},
	}}
}

var configLabels = map[string]string{"app.kubernetes.io/name": "capstan", "app.kubernetes.io/component": "webhook"}

// configurations are Capstan's webhook configurations for e, with every
// field the API server would default set, so that what is stored compares
// equal to what is wanted and an unchanged configuration is never written.
func configurations(e endpoint, caBundle []byte) (*admissionregistrationv1.ValidatingWebhookConfiguration, *admissionregistrationv1.MutatingWebhookConfiguration) {
	create, update, del := admissionregistrationv1.Create, admissionregistrationv1.Update, admissionregistrationv1.Delete
	common := func() (*admissionregistrationv1.FailurePolicyType, *admissionregistrationv1.MatchPolicyType, *admissionregistrationv1.SideEffectClass, *int32) {
		return ptr.To(admissionregistrationv1.Fail), ptr.To(admissionregistrationv1.Equivalent), ptr.To(admissionregistrationv1.SideEffectClassNone), ptr.To(int32(10))
	}
	validating := func(name, path, resource string, match []admissionregistrationv1.MatchCondition, ops ...admissionregistrationv1.OperationType) admissionregistrationv1.ValidatingWebhook {
		fail, matchPolicy, side, timeout := common()
		return admissionregistrationv1.ValidatingWebhook{
			Name: name, ClientConfig: e.clientConfig(path, caBundle), Rules: rule(resource, ops...),
			FailurePolicy: fail, MatchPolicy: matchPolicy, SideEffects: side, TimeoutSeconds: timeout,
			NamespaceSelector: &metav1.LabelSelector{}, ObjectSelector: &metav1.LabelSelector{},
			AdmissionReviewVersions: []string{"v1"}, MatchConditions: match,
		}
	}
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: ValidatingConfigurationName, Labels: configLabels},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{
			validating(clusterValidateName, ClusterValidatePath, "clusters",
				[]admissionregistrationv1.MatchCondition{{Name: "topology", Expression: hadOrHasTopolo}}, create, update),
			validating(clusterClassValidateName, ClusterClassValidatePath, "clusterclasses", nil, create, update, del),
		},
	}
	fail, matchPolicy, side, timeout := common()
	m := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: MutatingConfigurationName, Labels: configLabels},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name: clusterDefaultName, ClientConfig: e.clientConfig(ClusterDefaultPath, caBundle), Rules: rule("clusters", create, update),
			FailurePolicy: fail, MatchPolicy: matchPolicy, SideEffects: side, TimeoutSeconds: timeout,
			NamespaceSelector: &metav1.LabelSelector{}, ObjectSelector: &metav1.LabelSelector{},
			AdmissionReviewVersions: []string{"v1"}, ReinvocationPolicy: ptr.To(admissionregistrationv1.NeverReinvocationPolicy),
			MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "topology", Expression: hasTopology}},
		}},
	}
	return v, m
}

// ensureConfigurations creates or rewrites the configurations when they
// differ from what e and caBundle call for; nothing is written otherwise.
func ensureConfigurations(ctx context.Context, c client.Client, r client.Reader, e endpoint, caBundle []byte) error {
	v, m := configurations(e, caBundle)
	if err := ensure(ctx, c, r, v, &admissionregistrationv1.ValidatingWebhookConfiguration{},
		func(cur *admissionregistrationv1.ValidatingWebhookConfiguration) bool {
			if equality.Semantic.DeepEqual(cur.Webhooks, v.Webhooks) {
				return false
			}
			cur.Webhooks = v.Webhooks
			return true
		}); err != nil {
		return err
	}
	return ensure(ctx, c, r, m, &admissionregistrationv1.MutatingWebhookConfiguration{},
		func(cur *admissionregistrationv1.MutatingWebhookConfiguration) bool {
			if equality.Semantic.DeepEqual(cur.Webhooks, m.Webhooks) {
				return false
			}
			cur.Webhooks = m.Webhooks
			return true
		})
}

// ensure creates want, or updates the stored object when set says it
// changed it.
func ensure[T client.Object](ctx context.Context, c client.Client, r client.Reader, want, cur T, set func(T) bool) error {
	if err := r.Get(ctx, client.ObjectKeyFromObject(want), cur); err != nil {
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("reading %s: %w", want.GetName(), err)
		}
		if err := c.Create(ctx, want); err != nil {
			return fmt.Errorf("creating %s: %w", want.GetName(), err)
		}
		return nil
	}
	if !set(cur) {
		return nil
	}
	if err := c.Update(ctx, cur); err != nil {
		return fmt.Errorf("updating %s: %w", want.GetName(), err)
	}
	return nil
}

// Configurations are Capstan's webhook configurations as objects to
// delete: an uninstalled manager must not leave behind webhooks that nobody
// serves and that would refuse every topology Cluster.
func Configurations() []client.Object {
	return []client.Object{
		&admissionregistrationv1.ValidatingWebhookConfiguration{
			TypeMeta:   metav1.TypeMeta{APIVersion: admissionregistrationv1.SchemeGroupVersion.String(), Kind: "ValidatingWebhookConfiguration"},
			ObjectMeta: metav1.ObjectMeta{Name: ValidatingConfigurationName},
		},
		&admissionregistrationv1.MutatingWebhookConfiguration{
			TypeMeta:   metav1.TypeMeta{APIVersion: admissionregistrationv1.SchemeGroupVersion.String(), Kind: "MutatingWebhookConfiguration"},
			ObjectMeta: metav1.ObjectMeta{Name: MutatingConfigurationName},
		},
	}
}
