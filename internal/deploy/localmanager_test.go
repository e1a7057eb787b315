package deploy_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"capstan.dev/capstan/internal/deploy"
	"capstan.dev/capstan/internal/deploy/deploytest"
)

// Only the manager Pod as init installs it passes; every part of a Pod
// that reaches the host process is checked, so a workload cluster's user
// cannot run anything else of the capstan binary on the host.
func TestCheckLocalManagerPod(t *testing.T) {
	const dir = "/home/u/.local/state/capstan/local"
	if err := deploy.CheckLocalManagerPod(deploytest.ManagerPod(t, dir, "m", "n"), dir); err != nil {
		t.Fatalf("the installed manager is refused: %v", err)
	}
	for name, tc := range map[string]struct {
		change func(*corev1.Pod)
		dir    string
		want   string
	}{
		"the move the review found": {change: func(p *corev1.Pod) {
			p.Spec.Containers[0].Args = []string{"move", "--kubeconfig", "../../../../../../../kubeconfig", "--to-kubeconfig", "/tmp/k"}
		}, want: "args"},
		"another local dir": {change: func(p *corev1.Pod) {
			a := p.Spec.Containers[0].Args
			a[len(a)-1] = "--local-dir=/home/u"
		}, want: "args"},
		"an extra argument": {change: func(p *corev1.Pod) {
			p.Spec.Containers[0].Args = append(p.Spec.Containers[0].Args, "--kubeconfig=/home/u/.kube/config")
		}, want: "args"},
		"a command":               {change: func(p *corev1.Pod) { p.Spec.Containers[0].Command = []string{"/bin/sh"} }, want: "command"},
		"an environment":          {change: func(p *corev1.Pod) { p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "KUBECONFIG", Value: "../x"}} }, want: "environment"},
		"an environment source":   {change: func(p *corev1.Pod) { p.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{}} }, want: "environment"},
		"a working dir":           {change: func(p *corev1.Pod) { p.Spec.Containers[0].WorkingDir = "../../.." }, want: "workingDir"},
		"another namespace":       {change: func(p *corev1.Pod) { p.Namespace = "default" }, want: "namespace"},
		"no owner":                {change: func(p *corev1.Pod) { p.OwnerReferences = nil }, want: "controller"},
		"another ReplicaSet":      {change: func(p *corev1.Pod) { p.OwnerReferences[0].Name = "evil-5d4c8b9f7" }, want: "controller"},
		"a Job":                   {change: func(p *corev1.Pod) { p.OwnerReferences[0].Kind = "Job" }, want: "controller"},
		"another service account": {change: func(p *corev1.Pod) { p.Spec.ServiceAccountName = "default" }, want: "serviceAccountName"},
		"an init container": {change: func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{p.Spec.Containers[0]}
		}, want: "init"},
		"a second container": {change: func(p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, p.Spec.Containers[0])
		}, want: "2 containers"},
		"another image":                 {change: func(p *corev1.Pod) { p.Spec.Containers[0].Image = "example.com/capstan:v1" }, want: "image"},
		"no label":                      {change: func(p *corev1.Pod) { p.Labels = nil }, want: "label"},
		"a machine without a local dir": {dir: "-", want: "local provider directory"},
	} {
		t.Run(name, func(t *testing.T) {
			pod := deploytest.ManagerPod(t, dir, "m", "n")
			if tc.change != nil {
				tc.change(pod)
			}
			check := dir
			if tc.dir == "-" {
				check = ""
			}
			err := deploy.CheckLocalManagerPod(pod, check)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("CheckLocalManagerPod = %v, want a refusal naming %q", err, tc.want)
			}
		})
	}
}
