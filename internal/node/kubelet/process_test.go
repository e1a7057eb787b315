package kubelet_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"capstan.dev/capstan/internal/deploy"
	"capstan.dev/capstan/internal/deploy/deploytest"
	"capstan.dev/capstan/internal/node/kubelet"
	"capstan.dev/capstan/test/fixture"
)

// fakeCapstan is a stand-in for the capstan binary: a script that records
// each start in ran (pod, arguments, working directory and environment) and
// then behaves by its pod's name: failing-* exits 3, crashing-* exits 4,
// anything else writes its pid and sleeps.
func fakeCapstan(t *testing.T) (exe, ran string) {
	t.Helper()
	dir := t.TempDir()
	exe, ran = filepath.Join(dir, "capstan"), filepath.Join(dir, "ran")
	script := `#!/bin/sh
{ echo "pod=$POD_NAMESPACE/$POD_NAME args=$* pwd=$(pwd) home=$HOME"; env | sed 's/^/  env /'; } >> ` + ran + `
case "$POD_NAME" in
failing-*) echo failing; exit 3;;
crashing-*) exit 4;;
esac
echo $$ > pid
exec sleep 300
`
	if err := os.WriteFile(exe, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	return exe, ran
}

// managerPod is the installed manager's Pod on node, named name, with the
// given restart policy; its ReplicaSet exists, so the plane's garbage
// collector keeps it.
func managerPod(t *testing.T, c kubernetes.Interface, localDir, name, node string, policy corev1.RestartPolicy) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	pod := deploytest.ManagerPod(t, localDir, name, node)
	pod.Spec.RestartPolicy = policy
	pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](2)
	ref := &pod.OwnerReferences[0]
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: ref.Name},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To[int32](0),
			Selector: &metav1.LabelSelector{MatchLabels: pod.Labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: pod.Labels}, Spec: *pod.Spec.DeepCopy()},
		},
	}
	rs.Spec.Template.Spec.NodeName, rs.Spec.Template.Spec.RestartPolicy = "", corev1.RestartPolicyAlways
	created, err := c.AppsV1().ReplicaSets(pod.Namespace).Create(ctx, rs, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		created, err = c.AppsV1().ReplicaSets(pod.Namespace).Get(ctx, rs.Name, metav1.GetOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
	ref.UID = created.UID
	return pod
}

// managerNamespace makes the installation's namespace and service account
// in the shared API server, as init would.
func managerNamespace(t *testing.T, c kubernetes.Interface) {
	t.Helper()
	ctx := context.Background()
	_, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: deploy.Namespace}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: deploy.ManagerName}}
	if _, err := c.CoreV1().ServiceAccounts(deploy.Namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

func podDir(root string, pod *corev1.Pod) string {
	return filepath.Join(root, "var", "lib", "kubelet", "pods", string(pod.UID))
}

func processAlive(pid int) bool {
	return syscall.Kill(pid, 0) == nil || !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// readPid waits for the script to write its pid.
func readPid(t *testing.T, dir string) int {
	t.Helper()
	var pid int
	fixture.Eventually(t, "the process wrote its pid", 20*time.Second, func(context.Context) string {
		b, err := os.ReadFile(filepath.Join(dir, "pid"))
		if err != nil {
			return err.Error()
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return fixture.Unless(err == nil, fmt.Sprint(err))
	})
	return pid
}

// Capstan's manager Pod, as init installs it, runs as a real process with
// the installed arguments, a HOME and working directory of its own, none of
// the host's environment but PATH, and its service account's credentials;
// its status says what the process does (running, exited, restarted);
// deleting the pod or stopping the node stops it.
func TestManagerPodRunsAsProcess(t *testing.T) {
	ctx := context.Background()
	c := admin(t)
	managerNamespace(t, c)
	ns := deploy.Namespace
	name := "p-" + env.Namespace(t)
	root, localDir := t.TempDir(), t.TempDir()
	exe, ran := fakeCapstan(t)
	// The plane's own environment must not reach the pod's process.
	t.Setenv("CAPSTAN_PLANE_ONLY", "plane-secret")
	n := start(t, kubelet.Options{NodeName: name, ProviderID: "local://x/" + name, RootDir: root, LocalDir: localDir, Executable: exe})

	var created []string
	t.Cleanup(func() {
		for _, pod := range created {
			_ = c.CoreV1().Pods(ns).Delete(context.Background(), pod, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
		}
	})
	create := func(pod *corev1.Pod) *corev1.Pod {
		t.Helper()
		got, err := c.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		created = append(created, got.Name)
		return got
	}
	get := func(name string) *corev1.Pod {
		pod, err := c.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return pod
	}

	server := create(managerPod(t, c, localDir, "server-"+name, name, corev1.RestartPolicyAlways))
	create(managerPod(t, c, localDir, "failing-"+name, name, corev1.RestartPolicyNever))
	create(managerPod(t, c, localDir, "crashing-"+name, name, corev1.RestartPolicyAlways))

	fixture.Eventually(t, "the server pod running and ready", 20*time.Second, func(context.Context) string {
		pod := get(server.Name)
		cs := pod.Status.ContainerStatuses
		ok := pod.Status.Phase == corev1.PodRunning && condition(pod, corev1.PodReady) == corev1.ConditionTrue &&
			len(cs) == 1 && cs[0].State.Running != nil && cs[0].Ready && cs[0].RestartCount == 0
		return fixture.Unless(ok, fmt.Sprintf("phase %s, containers %+v", pod.Status.Phase, cs))
	})
	dir := podDir(root, server)
	pid := readPid(t, dir)
	// A running process's status is written once, not rewritten on every
	// sync (times are kept at the API's one-second precision).
	rv := get(server.Name).ResourceVersion
	time.Sleep(2 * time.Second)
	if now := get(server.Name); now.ResourceVersion != rv {
		t.Errorf("the running server pod was re-written: resourceVersion %s → %s, status %+v", rv, now.ResourceVersion, now.Status.ContainerStatuses)
	}
	if !processAlive(pid) {
		t.Fatalf("the server's process %d is not running", pid)
	}
	record, err := os.ReadFile(ran)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("pod=%s/%s args=manager --leader-elect --leader-election-namespace=%s --metrics-bind-address=0 --health-probe-bind-address=0 --local-dir=%s pwd=%s home=%s",
		ns, server.Name, ns, localDir, dir, dir)
	if !strings.Contains(string(record), want+"\n") {
		t.Errorf("the process's record %s:\n%s\nwant the line %q", ran, record, want)
	}
	if strings.Contains(string(record), "plane-secret") {
		t.Errorf("the host's environment reached the pod's process:\n%s", record)
	}
	// The kubeconfig it was given authenticates as the pod's service account.
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, "kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	podClient, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	review, err := podClient.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("the pod's kubeconfig does not reach the API server: %v", err)
	}
	if got, want := review.Status.UserInfo.Username, "system:serviceaccount:"+ns+":"+deploy.ManagerName; got != want {
		t.Errorf("the pod's credentials are %s, want %s", got, want)
	}

	fixture.Eventually(t, "the failing pod Failed with exit code 3", 20*time.Second, func(context.Context) string {
		pod := get("failing-" + name)
		cs := pod.Status.ContainerStatuses
		ok := pod.Status.Phase == corev1.PodFailed && len(cs) == 1 && cs[0].State.Terminated != nil &&
			cs[0].State.Terminated.ExitCode == 3 && cs[0].RestartCount == 0 && !cs[0].Ready
		return fixture.Unless(ok, fmt.Sprintf("phase %s, containers %+v", pod.Status.Phase, cs))
	})
	fixture.Eventually(t, "the crashing pod restarted with back-off", 40*time.Second, func(context.Context) string {
		pod := get("crashing-" + name)
		cs := pod.Status.ContainerStatuses
		ok := pod.Status.Phase == corev1.PodRunning && condition(pod, corev1.PodReady) == corev1.ConditionFalse &&
			len(cs) == 1 && cs[0].RestartCount >= 1 && cs[0].LastTerminationState.Terminated != nil &&
			cs[0].LastTerminationState.Terminated.ExitCode == 4
		return fixture.Unless(ok, fmt.Sprintf("phase %s, containers %+v", pod.Status.Phase, cs))
	})

	// Deleting the pod stops its process, then the pod goes.
	if err := c.CoreV1().Pods(ns).Delete(ctx, server.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, "the deleted server pod gone", 20*time.Second, func(ctx context.Context) string {
		_, err := c.CoreV1().Pods(ns).Get(ctx, server.Name, metav1.GetOptions{})
		return fixture.Unless(apierrors.IsNotFound(err), fmt.Sprint(err))
	})
	if processAlive(pid) {
		t.Errorf("process %d of the deleted pod still runs", pid)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the deleted pod's directory %s is left: %v", dir, err)
	}

	// Stopping the node stops the processes of its pods.
	again := create(managerPod(t, c, localDir, "again-"+name, name, corev1.RestartPolicyAlways))
	pid = readPid(t, podDir(root, again))
	n.stop(t)
	if processAlive(pid) {
		t.Errorf("process %d still runs after its node stopped", pid)
	}
}

// A workload cluster's user cannot run the capstan binary on the host: a
// Pod of Capstan's image that is not the installed manager, down to its
// arguments, is refused, its status says why, and nothing runs. Pods of
// other images are still reported as running.
func TestPodsOfCapstanImageOtherThanTheManagerAreRefused(t *testing.T) {
	ctx := context.Background()
	c := admin(t)
	managerNamespace(t, c)
	ns := env.Namespace(t)
	ensureServiceAccount(t, c, ns)
	name := "r-" + ns
	root, localDir := t.TempDir(), t.TempDir()
	exe, ran := fakeCapstan(t)
	start(t, kubelet.Options{NodeName: name, ProviderID: "local://x/" + name, RootDir: root, LocalDir: localDir, Executable: exe})

	// The review's example: the plane's kubeconfig by a path relative to
	// the working directory the process would have had.
	move := []string{"move", "--kubeconfig", "../../../../../../../../kubeconfig", "--to-kubeconfig", "/tmp/stolen"}
	anywhere := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "move"},
		Spec: corev1.PodSpec{NodeName: name, Containers: []corev1.Container{{
			Name: "main", Image: deploy.Image("v1.0.0"), Command: []string{"capstan"}, Args: move,
		}}},
	}
	// The same from a Pod that looks like the manager in every other way.
	lookalike := managerPod(t, c, localDir, "lookalike-"+name, name, corev1.RestartPolicyAlways)
	lookalike.Spec.Containers[0].Args = move
	// The installed manager's arguments, but the plane's HOME asked for.
	withEnv := managerPod(t, c, localDir, "env-"+name, name, corev1.RestartPolicyAlways)
	withEnv.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "HOME", Value: os.Getenv("HOME")}}
	other := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "other"},
		Spec:       corev1.PodSpec{NodeName: name, Containers: []corev1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10"}}},
	}
	var refused []*corev1.Pod
	for _, pod := range []*corev1.Pod{anywhere, lookalike, withEnv, other} {
		got, err := c.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = c.CoreV1().Pods(got.Namespace).Delete(context.Background(), got.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
		})
		if pod != other {
			refused = append(refused, got)
		}
	}
	for _, pod := range refused {
		fixture.Eventually(t, "pod "+pod.Namespace+"/"+pod.Name+" refused", 20*time.Second, func(ctx context.Context) string {
			got, err := c.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
			if err != nil {
				return err.Error()
			}
			cs := got.Status.ContainerStatuses
			ok := got.Status.Phase == corev1.PodPending && condition(got, corev1.PodReady) == corev1.ConditionFalse &&
				len(cs) == 1 && cs[0].State.Waiting != nil && cs[0].State.Waiting.Reason == kubelet.ReasonHostProcessRefused &&
				strings.Contains(cs[0].State.Waiting.Message, "capstan init --infrastructure local")
			return fixture.Unless(ok, fmt.Sprintf("phase %s, containers %+v", got.Status.Phase, cs))
		})
	}
	fixture.Eventually(t, "the pod of another image simulated as running", 20*time.Second, func(ctx context.Context) string {
		got, err := c.CoreV1().Pods(ns).Get(ctx, "other", metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		return fixture.Unless(got.Status.Phase == corev1.PodRunning && condition(got, corev1.PodReady) == corev1.ConditionTrue, string(got.Status.Phase))
	})
	// Nothing ran, and no pod directory was made.
	if record, err := os.ReadFile(ran); !os.IsNotExist(err) {
		t.Errorf("the capstan binary ran for a refused pod:\n%s", record)
	}
	if entries, _ := os.ReadDir(filepath.Join(root, "var", "lib", "kubelet", "pods")); len(entries) > 0 {
		t.Errorf("pod directories were made for refused pods: %v", entries)
	}
}
