package deploy_test

import (
	"context"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"capstan.dev/capstan/internal/deploy"
)

func metav1ObjectMeta(name string, labels map[string]string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Labels: labels}
}

func eventuallyAggregated(t *testing.T, ok func(*rbacv1.ClusterRole) bool) {
	t.Helper()
	role := &rbacv1.ClusterRole{}
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKey{Name: deploy.ManagerName}, role); err != nil {
			return false, nil
		}
		return ok(role), nil
	})
	if err != nil {
		t.Fatalf("the manager role did not aggregate the provider's rules: %+v", role.Rules)
	}
}
