package deploy_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"capstan.dev/capstan/internal/deploy"
	"capstan.dev/capstan/internal/testenv"
	"capstan.dev/capstan/internal/version"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

// managerImage is the manager Deployment's image in objs.
func managerImage(t *testing.T, objs []client.Object) string {
	t.Helper()
	for _, obj := range objs {
		if d, ok := obj.(*appsv1.Deployment); ok {
			return d.Spec.Template.Spec.Containers[0].Image
		}
	}
	t.Fatal("no manager Deployment")
	return ""
}

// The committed manifests are what Objects makes, with the manager's image
// pinned to the version they were generated at: never a moving tag.
func TestCommittedManifestsAreCurrent(t *testing.T) {
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(root, "config/deploy/capstan.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	image := regexp.MustCompile(`(?m)^\s+image: (` + regexp.QuoteMeta(deploy.DefaultImage) + `:\S+)$`).FindSubmatch(got)
	if image == nil {
		t.Fatalf("config/deploy/capstan.yaml has no %s image", deploy.DefaultImage)
	}
	tag := strings.TrimPrefix(string(image[1]), deploy.DefaultImage+":")
	if tag == "latest" || tag == "dev" || strings.HasSuffix(tag, "-dirty") {
		t.Errorf("config/deploy/capstan.yaml runs the manager image %s: pin it to a release or commit (make generate)", image[1])
	}
	objs, err := deploy.Objects(deploy.Options{Image: string(image[1])})
	if err != nil {
		t.Fatal(err)
	}
	want, err := deploy.YAML(objs)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Error("config/deploy/capstan.yaml is stale; run make generate")
	}
}

// Without an image, the manager runs the binary's own version.
func TestDefaultImageIsTheBinarysVersion(t *testing.T) {
	objs, err := deploy.Objects(deploy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := managerImage(t, objs), deploy.Image(version.Version); got != want || strings.HasSuffix(got, ":latest") {
		t.Errorf("manager image %s, want %s", got, want)
	}
}

// The manifests apply to a real API server, and the manager's role gathers
// what providers grant through the aggregation label.
func TestManifestsApplyAndAggregate(t *testing.T) {
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
	providerRole := &rbacv1.ClusterRole{
		ObjectMeta: metav1ObjectMeta("infra-provider", map[string]string{deploy.AggregateToManagerLabel: "true"}),
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"infrastructure.example.com"}, Resources: []string{"widgets"}, Verbs: []string{"get"}}},
	}
	if err := env.Client.Create(ctx, providerRole); err != nil {
		t.Fatal(err)
	}
	eventuallyAggregated(t, func(role *rbacv1.ClusterRole) bool {
		for _, r := range role.Rules {
			if len(r.APIGroups) == 1 && r.APIGroups[0] == "infrastructure.example.com" {
				return true
			}
		}
		return false
	})
}

// The manager's rights name each resource, group and verb: a wildcard would
// grant whatever kinds a group gains later, other teams' included.
func TestManagerRulesNameEveryResource(t *testing.T) {
	objs, err := deploy.Objects(deploy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	granted := map[string]bool{}
	for _, obj := range objs {
		role, ok := obj.(*rbacv1.ClusterRole)
		if !ok || (role.Name != deploy.ManagerName && role.Labels[deploy.AggregateToManagerLabel] != "true") {
			continue
		}
		for _, r := range role.Rules {
			for _, list := range [][]string{r.APIGroups, r.Resources, r.Verbs} {
				if slices.Contains(list, "*") {
					t.Errorf("ClusterRole %s grants a wildcard: %+v", role.Name, r)
				}
			}
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					granted[g+"/"+res] = true
				}
			}
		}
	}
	// Every kind of Capstan's own CRDs is granted, with its status.
	for _, want := range []string{"cluster.x-k8s.io/clusters", "cluster.x-k8s.io/clusters/status", "cluster.x-k8s.io/machinedrainrules",
		"addons.cluster.x-k8s.io/clusterresourcesetbindings", "bootstrap.cluster.x-k8s.io/kubeadmconfigs/status",
		"controlplane.cluster.x-k8s.io/kubeadmcontrolplanes/finalizers", "infrastructure.cluster.x-k8s.io/localmachines/status",
		"infrastructure.cluster.x-k8s.io/qemumachines/status", "infrastructure.cluster.x-k8s.io/qemuclusters/finalizers"} {
		if !granted[want] {
			t.Errorf("the manager is not granted %s", want)
		}
	}
}
