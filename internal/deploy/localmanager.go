package deploy

import (
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// localManagerArgs are the manager's arguments when it runs the local
// provider on localDir. A local machine runs a Pod with exactly these
// arguments as a process of its host (CheckLocalManagerPod), so they are
// written here once.
func localManagerArgs(localDir string) []string {
	return []string{"manager", "--leader-elect", "--leader-election-namespace=" + Namespace,
		"--metrics-bind-address=0", "--health-probe-bind-address=0", "--local-dir=" + localDir}
}

// CheckLocalManagerPod says why pod is not Capstan's own manager as `capstan
// init --infrastructure local` installs it for the machines under localDir,
// or nil when it is. A local machine runs that Pod, and no other, as a
// process of the host's capstan binary: anything else a workload cluster's
// user could write into a Pod would run as the host's user, beside the
// management plane's files. So every part of the Pod that reaches the
// process (namespace, owner, service account, container, command,
// arguments, environment, working directory) must be what the installation
// writes.
func CheckLocalManagerPod(pod *corev1.Pod, localDir string) error {
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if localDir == "" {
		add("this machine runs no manager (it does not know its local provider directory)")
	}
	if pod.Namespace != Namespace {
		add("namespace is %q, not %q", pod.Namespace, Namespace)
	}
	if pod.Labels[managerLabel] != managerLabelOf {
		add("label %s is %q, not %q", managerLabel, pod.Labels[managerLabel], managerLabelOf)
	}
	// A Deployment's ReplicaSet is named after it and the template's hash,
	// which it also puts on the Pod.
	hash := pod.Labels[appsv1.DefaultDeploymentUniqueLabelKey]
	owner := ""
	for _, ref := range pod.OwnerReferences {
		if ref.Controller != nil && *ref.Controller {
			owner = ref.APIVersion + " " + ref.Kind + " " + ref.Name
		}
	}
	if want := "apps/v1 ReplicaSet " + ManagerName + "-" + hash; hash == "" || owner != want {
		add("its controller is %q, not the ReplicaSet of Deployment %s (%q)", owner, ManagerName, want)
	}
	if pod.Spec.ServiceAccountName != ManagerName {
		add("spec.serviceAccountName is %q, not %q", pod.Spec.ServiceAccountName, ManagerName)
	}
	if len(pod.Spec.InitContainers) > 0 || len(pod.Spec.EphemeralContainers) > 0 {
		add("it has init or ephemeral containers")
	}
	if len(pod.Spec.Containers) != 1 {
		add("it has %d containers, not the one container %q", len(pod.Spec.Containers), "manager")
	} else {
		c := pod.Spec.Containers[0]
		if c.Name != "manager" {
			add("its container is named %q, not %q", c.Name, "manager")
		}
		if !IsCapstanImage(c.Image) {
			add("image %q is not %s", c.Image, DefaultImage)
		}
		if len(c.Command) > 0 {
			add("the container sets a command (%s); the manager's has none", strings.Join(c.Command, " "))
		}
		if want := localManagerArgs(localDir); !slices.Equal(c.Args, want) {
			add("the container's args are %q, not %q", c.Args, want)
		}
		if len(c.Env) > 0 || len(c.EnvFrom) > 0 {
			add("the container sets environment variables; the manager's sets none")
		}
		if c.WorkingDir != "" {
			add("the container sets workingDir %q; the manager's sets none", c.WorkingDir)
		}
	}
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("pod %s/%s is not Capstan's manager as `capstan init --infrastructure local` installs it: %s",
		pod.Namespace, pod.Name, strings.Join(problems, "; "))
}
