package deploy_test

import (
	"context"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"capstan.dev/capstan/internal/deploy"
	"capstan.dev/capstan/internal/webhook"
	"capstan.dev/capstan/test/fixture"
)

// The installation ships the manager's two webhook configurations, and the
// manager may fill in those and no others: it cannot create a new one, nor
// read or change one of someone else's, since a webhook configuration
// intercepts whatever objects it names.
func TestManagerWritesOnlyItsOwnWebhookConfigurations(t *testing.T) {
	ctx := context.Background()
	objs, err := deploy.Objects(deploy.Options{Image: "example.com/capstan:test"})
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range objs {
		if err := env.Client.Patch(ctx, obj, client.Apply, client.FieldOwner("test"), client.ForceOwnership); err != nil {
			t.Fatalf("applying %s %s: %v", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), err)
		}
	}
	others := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "another-teams-webhooks-" + env.Namespace(t)}}
	if err := env.Client.Create(ctx, others); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), others) })

	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + deploy.Namespace + ":" + deploy.ManagerName,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + deploy.Namespace, "system:authenticated"},
	}
	manager, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	// Its own: read and rewritten, as the webhook server does (once the
	// role has aggregated the manager's rules).
	fixture.Eventually(t, "the manager updating its own webhook configurations", 30*time.Second, func(ctx context.Context) string {
		for _, own := range webhook.Configurations() {
			if err := manager.Get(ctx, client.ObjectKeyFromObject(own), own); err != nil {
				return err.Error()
			}
			own.SetLabels(map[string]string{"test": "updated"})
			if err := manager.Update(ctx, own); err != nil {
				return err.Error()
			}
		}
		return ""
	})

	evil := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "capstan-extra-" + env.Namespace(t)}}
	if err := manager.Create(ctx, evil); !apierrors.IsForbidden(err) {
		_ = env.Client.Delete(ctx, evil)
		t.Errorf("the manager creating a webhook configuration: %v; want Forbidden", err)
	}
	if err := manager.Get(ctx, client.ObjectKeyFromObject(others), &admissionregistrationv1.MutatingWebhookConfiguration{}); !apierrors.IsForbidden(err) {
		t.Errorf("the manager reading another webhook configuration: %v; want Forbidden", err)
	}
	patch := client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"labels":{"taken":"over"}}}`))
	if err := manager.Patch(ctx, others.DeepCopy(), patch); !apierrors.IsForbidden(err) {
		t.Errorf("the manager patching another webhook configuration: %v; want Forbidden", err)
	}
	if err := manager.List(ctx, &admissionregistrationv1.ValidatingWebhookConfigurationList{}); !apierrors.IsForbidden(err) {
		t.Errorf("the manager listing webhook configurations: %v; want Forbidden", err)
	}
}
