package cli

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/move"
)

// TestUpRefusesABadClusterBeforeStarting: up --cluster with a variable
// that cannot make a cluster fails before the plane starts, naming the
// flag; nothing is written to the state directory.
func TestUpRefusesABadClusterBeforeStarting(t *testing.T) {
	isolateTemplateVariables(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--kubernetes-version", "banana"}, `--kubernetes-version (KUBERNETES_VERSION) "banana"`},
		{[]string{"--control-plane-machine-count", "2"}, "must be odd"},
		{[]string{"--flavor", "topology", "--worker-machine-count", "-1"}, "must not be negative"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "state")
			_, _, err := runCapstan(t, append([]string{"up", "--state-dir", dir, "--cluster", "x"}, tc.args...)...)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "--cluster x") {
				t.Fatalf("got %v, want an error about %q", err, tc.want)
			}
			if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the state directory was made (%v): the plane started", err)
			}
		})
	}
}

// TestApplyIsAllOrNothing: when the API server refuses one object of a
// manifest, none is applied, and the error names each refused object.
func TestApplyIsAllOrNothing(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	manifest := `apiVersion: cluster.x-k8s.io/v1beta2
kind: Cluster
metadata:
  name: half
  namespace: ` + ns + `
spec:
  clusterNetwork:
    pods:
      cidrBlocks: ["10.244.0.0/16"]
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: Not_A_Name
  namespace: ` + ns + `
---
apiVersion: nowhere.capstan.dev/v1
kind: Ghost
metadata:
  name: half
  namespace: ` + ns + `
`
	err := applyManifests(ctx, env.Client, manifest)
	if err == nil || !strings.Contains(err.Error(), "refuses 2 of the 3 objects, so none was applied") ||
		!strings.Contains(err.Error(), "ConfigMap Not_A_Name") || !strings.Contains(err.Error(), "Ghost half") {
		t.Fatalf("got %v, want a refusal naming the ConfigMap and the Ghost", err)
	}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "half"}, &clusterv1.Cluster{}); !apierrors.IsNotFound(err) {
		t.Errorf("the Cluster was applied with the rest refused (get: %v)", err)
	}
	cms := &corev1.ConfigMapList{}
	if err := env.Client.List(ctx, cms, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, cm := range cms.Items {
		if cm.Name != "kube-root-ca.crt" {
			t.Errorf("ConfigMap %s was applied", cm.Name)
		}
	}
}

// TestMoveErrorNamesTheCommands: a move that stopped after changing
// something says how to finish it, and while it can be, how to undo it,
// with the flags it was given.
func TestMoveErrorNamesTheCommands(t *testing.T) {
	o := &moveOptions{kubeconfig: "/home/me/source config", toDirectory: "/backup/moved", pauseTimeout: defaultPauseTimeout}
	undoable := &move.Error{Step: "creating", Err: errors.New("disk full"), Changed: []string{"paused 2 objects in the source"}, Undoable: true}
	msg := o.explain("prod", undoable).Error()
	for _, want := range []string{
		"disk full",
		"To finish the move, run it again:\n  capstan move --kubeconfig '/home/me/source config' --to-directory /backup/moved --namespace prod\n",
		"To undo it instead (remove the copies, unpause the source):\n  capstan move --kubeconfig '/home/me/source config' --to-directory /backup/moved --namespace prod --undo",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("the error does not say %q:\n%s", want, msg)
		}
	}
	past := &move.Error{Step: "deleting", Err: errors.New("gone"), Changed: []string{"deleted 1 objects from the source"}}
	if msg := o.explain("prod", past).Error(); strings.Contains(msg, "--undo") || !strings.Contains(msg, "To finish the move") {
		t.Errorf("past the first deletion the error must only say how to finish:\n%s", msg)
	}
	untouched := &move.Error{Step: "checking the target", Err: errors.New("no")}
	if msg := o.explain("prod", untouched).Error(); strings.Contains(msg, "capstan move") {
		t.Errorf("a move that changed nothing has nothing to finish:\n%s", msg)
	}
}

// TestMoveToAnUnwritableDirectoryPausesNothing is the report's case: a
// move into a directory that cannot be made fails before it pauses any
// Cluster, and says nothing changed.
func TestMoveToAnUnwritableDirectoryPausesNothing(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	cl := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "stay"},
		Spec: clusterv1.ClusterSpec{ClusterNetwork: clusterv1.ClusterNetwork{Pods: clusterv1.NetworkRanges{CIDRBlocks: []string{"10.244.0.0/16"}}}}}
	if err := env.Client.Create(ctx, cl); err != nil {
		t.Fatal(err)
	}
	_, _, err := runCapstan(t, "move", "--kubeconfig", envKubeconfig(), "--to-directory", "/proc/x", "-n", ns, "--pause-timeout", "0")
	if err == nil || !strings.Contains(err.Error(), "the target directory cannot be made") || !strings.Contains(err.Error(), "Nothing was changed.") {
		t.Fatalf("got %v, want a refusal that changed nothing", err)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cl), cl); err != nil {
		t.Fatal(err)
	}
	if cl.Spec.Paused != nil || len(cl.Annotations) > 0 {
		t.Errorf("the Cluster was touched: paused %v, annotations %v", cl.Spec.Paused, cl.Annotations)
	}
}

// TestApplyStoppedMidwaySaysHowToFinish: a write that fails after the dry
// run passed (the API server went away, say) names what was applied and
// the way to finish, and running it again does.
func TestApplyStoppedMidwaySaysHowToFinish(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	manifest := ""
	for _, name := range []string{"one", "two", "three"} {
		manifest += "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n  namespace: " + ns + "\n---\n"
	}
	base, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	writes := 0
	flaky := interceptor.NewClient(base, interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			po := &client.PatchOptions{}
			po.ApplyOptions(opts)
			if len(po.DryRun) == 0 {
				if writes++; writes == 3 {
					return errors.New("connection refused")
				}
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
	})
	err = applyManifests(ctx, flaky, manifest)
	if err == nil || !strings.Contains(err.Error(), "applying ConfigMap three: connection refused; 2 of the 3 objects were applied before it (ConfigMap one, ConfigMap two): run the same command again") {
		t.Fatalf("got %v, want the applied objects named and the way to finish", err)
	}
	if err := applyManifests(ctx, env.Client, manifest); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"one", "two", "three"} {
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &corev1.ConfigMap{}); err != nil {
			t.Errorf("ConfigMap %s: %v", name, err)
		}
	}
}
