package deploy_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"capstan.dev/capstan/internal/deploy"
	"capstan.dev/capstan/test/fixture"
)

func metav1ObjectMeta(name string, labels map[string]string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Labels: labels}
}

func eventuallyAggregated(t *testing.T, ok func(*rbacv1.ClusterRole) bool) {
	t.Helper()
	role := &rbacv1.ClusterRole{}
	fixture.Eventually(t, "the manager role aggregating the provider's rules", 30*time.Second, func(ctx context.Context) string {
		if err := env.Client.Get(ctx, client.ObjectKey{Name: deploy.ManagerName}, role); err != nil {
			return err.Error()
		}
		return fixture.Unless(ok(role), fmt.Sprintf("rules %+v", role.Rules))
	})
}
