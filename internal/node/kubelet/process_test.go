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

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"capstan.dev/capstan/internal/deploy"
	"capstan.dev/capstan/internal/node/kubelet"
	"capstan.dev/capstan/test/fixture"
)

// processPod is a pod of Capstan's image whose "capstan" is /bin/sh here,
// running script.
func processPod(ns, name, node string, policy corev1.RestartPolicy, script string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{
			NodeName:                      node,
			RestartPolicy:                 policy,
			TerminationGracePeriodSeconds: ptr.To[int64](2),
			Containers: []corev1.Container{{
				Name: "main", Image: deploy.Image("test"),
				Command: []string{"/capstan"},
				Args:    []string{"-c", script},
				Env: []corev1.EnvVar{
					{Name: "GREETING", Value: "hello"},
					{Name: "MY_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
				},
			}},
		},
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

// Pods of Capstan's image run as real processes with the pod's arguments,
// environment and service-account credentials; their status says what the
// process does (running, exited, restarted); deleting the pod or stopping
// the node stops them.
func TestPodsOfCapstanImageRunAsProcesses(t *testing.T) {
	ctx := context.Background()
	c := admin(t)
	ns := env.Namespace(t)
	ensureServiceAccount(t, c, ns)
	name := "p-" + ns
	root := t.TempDir()
	n := start(t, kubelet.Options{NodeName: name, ProviderID: "local://" + ns + "/" + name, RootDir: root, Executable: "/bin/sh"})

	create := func(pod *corev1.Pod) *corev1.Pod {
		t.Helper()
		created, err := c.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return created
	}
	get := func(name string) *corev1.Pod {
		pod, err := c.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return pod
	}

	server := create(processPod(ns, "server", name, corev1.RestartPolicyAlways,
		`echo $$ > pid; echo "greeting=$GREETING name=$MY_NAME ns=$POD_NAMESPACE"; exec sleep 300`))
	failing := create(processPod(ns, "failing", name, corev1.RestartPolicyNever, `echo failing; exit 3`))
	crashing := create(processPod(ns, "crashing", name, corev1.RestartPolicyAlways, `exit 4`))
	// Another image keeps the simulated behaviour: Running, no process.
	other := processPod(ns, "other", name, corev1.RestartPolicyAlways, "")
	other.Spec.Containers[0].Image = "registry.k8s.io/pause:3.10"
	other = create(other)

	fixture.Eventually(t, "the server pod running and ready", 20*time.Second, func(context.Context) string {
		pod := get("server")
		cs := pod.Status.ContainerStatuses
		ok := pod.Status.Phase == corev1.PodRunning && condition(pod, corev1.PodReady) == corev1.ConditionTrue &&
			len(cs) == 1 && cs[0].State.Running != nil && cs[0].Ready && cs[0].RestartCount == 0
		return fixture.Unless(ok, fmt.Sprintf("phase %s, containers %+v", pod.Status.Phase, cs))
	})
	dir := podDir(root, server)
	pid := readPid(t, dir)
	// A running process's status is written once, not rewritten on every
	// sync (times are kept at the API's one-second precision).
	rv := get("server").ResourceVersion
	time.Sleep(2 * time.Second)
	if now := get("server"); now.ResourceVersion != rv {
		t.Errorf("the running server pod was re-written: resourceVersion %s → %s, status %+v", rv, now.ResourceVersion, now.Status.ContainerStatuses)
	}
	if !processAlive(pid) {
		t.Fatalf("the server's process %d is not running", pid)
	}
	logBody, err := os.ReadFile(filepath.Join(dir, "main.log"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "greeting=hello name=server ns=" + ns; !strings.Contains(string(logBody), want) {
		t.Errorf("log %s:\n%s\nwant %q", filepath.Join(dir, "main.log"), logBody, want)
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
	if got, want := review.Status.UserInfo.Username, "system:serviceaccount:"+ns+":default"; got != want {
		t.Errorf("the pod's credentials are %s, want %s", got, want)
	}

	fixture.Eventually(t, "the failing pod Failed with exit code 3", 20*time.Second, func(context.Context) string {
		pod := get("failing")
		cs := pod.Status.ContainerStatuses
		ok := pod.Status.Phase == corev1.PodFailed && len(cs) == 1 && cs[0].State.Terminated != nil &&
			cs[0].State.Terminated.ExitCode == 3 && cs[0].RestartCount == 0 && !cs[0].Ready
		return fixture.Unless(ok, fmt.Sprintf("phase %s, containers %+v", pod.Status.Phase, cs))
	})
	fixture.Eventually(t, "the crashing pod restarted with back-off", 40*time.Second, func(context.Context) string {
		pod := get("crashing")
		cs := pod.Status.ContainerStatuses
		ok := pod.Status.Phase == corev1.PodRunning && condition(pod, corev1.PodReady) == corev1.ConditionFalse &&
			len(cs) == 1 && cs[0].RestartCount >= 1 && cs[0].LastTerminationState.Terminated != nil &&
			cs[0].LastTerminationState.Terminated.ExitCode == 4
		return fixture.Unless(ok, fmt.Sprintf("phase %s, containers %+v", pod.Status.Phase, cs))
	})
	fixture.Eventually(t, "the pod of another image simulated as running", 20*time.Second, func(context.Context) string {
		pod := get("other")
		return fixture.Unless(pod.Status.Phase == corev1.PodRunning && condition(pod, corev1.PodReady) == corev1.ConditionTrue, string(pod.Status.Phase))
	})
	if _, err := os.Stat(podDir(root, other)); !os.IsNotExist(err) {
		t.Errorf("a directory was made for the pod of another image: %v", err)
	}

	// Deleting the pod stops its process, then the pod goes.
	if err := c.CoreV1().Pods(ns).Delete(ctx, "server", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, "the deleted server pod gone", 20*time.Second, func(ctx context.Context) string {
		_, err := c.CoreV1().Pods(ns).Get(ctx, "server", metav1.GetOptions{})
		return fixture.Unless(apierrors.IsNotFound(err), fmt.Sprint(err))
	})
	if processAlive(pid) {
		t.Errorf("process %d of the deleted pod still runs", pid)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the deleted pod's directory %s is left: %v", dir, err)
	}

	// Stopping the node stops the processes of its pods.
	again := create(processPod(ns, "again", name, corev1.RestartPolicyAlways, `echo $$ > pid; exec sleep 300`))
	pid = readPid(t, podDir(root, again))
	n.stop(t)
	if processAlive(pid) {
		t.Errorf("process %d still runs after its node stopped", pid)
	}
	_ = failing
	_ = crashing
}
