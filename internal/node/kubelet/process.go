package kubelet

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	"capstan.dev/capstan/internal/atomicfile"
	"capstan.dev/capstan/internal/deploy"
)

// Restart back-off of a container that exited, as the kubelet's: it doubles
// from backoffInitial up to backoffMax, and starts over once a container
// ran for backoffReset.
const (
	backoffInitial = 10 * time.Second
	backoffMax     = 5 * time.Minute
	backoffReset   = 10 * time.Minute
)

// tokenLifetime is how long the service-account tokens given to process
// pods live; they are renewed at four fifths of it.
const tokenLifetime = time.Hour

// usesCapstanImage reports whether any of the pod's containers is of
// Capstan's own image: such a pod either is the manager this kubelet runs
// as a process, or is refused; it is never reported as running when it
// does not.
func usesCapstanImage(pod *corev1.Pod) bool {
	for _, c := range pod.Spec.InitContainers {
		if deploy.IsCapstanImage(c.Image) {
			return true
		}
	}
	for _, c := range pod.Spec.Containers {
		if deploy.IsCapstanImage(c.Image) {
			return true
		}
	}
	for _, c := range pod.Spec.EphemeralContainers {
		if deploy.IsCapstanImage(c.Image) {
			return true
		}
	}
	return false
}

// ReasonHostProcessRefused is the waiting reason of the containers of a
// pod of Capstan's image that this kubelet will not run (see
// deploy.CheckLocalManagerPod).
const ReasonHostProcessRefused = "HostProcessRefused"

// refusedPodStatus is the status of a pod this kubelet will not run: it
// stays Pending, each container waiting with the reason.
func refusedPodStatus(pod *corev1.Pod, podIP, hostIP string, now metav1.Time, refusal error) corev1.PodStatus {
	s := desiredPodStatus(pod, podIP, hostIP, now, false)
	s.Phase = corev1.PodPending
	waiting := corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: ReasonHostProcessRefused, Message: refusal.Error()}}
	for i := range s.InitContainerStatuses {
		s.InitContainerStatuses[i].State, s.InitContainerStatuses[i].Ready, s.InitContainerStatuses[i].Started = waiting, false, ptr.To(false)
	}
	for i := range s.ContainerStatuses {
		s.ContainerStatuses[i].State, s.ContainerStatuses[i].Ready, s.ContainerStatuses[i].Started = waiting, false, ptr.To(false)
	}
	return s
}

// processes are the pods this kubelet runs as real processes, by UID.
type processes struct {
	k    *kubelet
	mu   sync.Mutex
	pods map[types.UID]*processPod
	wg   sync.WaitGroup
}

// processPod is one pod's processes and their state.
type processPod struct {
	key    string
	dir    string
	cancel context.CancelFunc
	// stopped is closed when every container's process has ended for good.
	stopped chan struct{}

	mu         sync.Mutex
	containers map[string]*containerState
	// grace, when set, replaces the pod's termination grace period: a
	// deletion may ask for a shorter one.
	grace *time.Duration
}

// containerState is what the kubelet reports of one container.
type containerState struct {
	running    bool
	startedAt  time.Time
	restarts   int32
	waiting    string // reason while not running and not finished
	waitingMsg string
	finished   bool // will not be started again
	last       *corev1.ContainerStateTerminated
}

func (p *processes) get(uid types.UID) *processPod {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pods[uid]
}

// ensure starts the pod's processes unless they already run.
func (p *processes) ensure(pod *corev1.Pod) (*processPod, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pp := p.pods[pod.UID]; pp != nil {
		return pp, nil
	}
	key, err := cache.MetaNamespaceKeyFunc(pod)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(p.k.o.RootDir, "var", "lib", "kubelet", "pods", string(pod.UID))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("pod %s: creating its directory: %w", key, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	pp := &processPod{key: key, dir: dir, cancel: cancel, stopped: make(chan struct{}), containers: map[string]*containerState{}}
	for _, c := range pod.Spec.Containers {
		st := &containerState{waiting: "ContainerCreating"}
		// A container this pod reported as started before the kubelet
		// restarted died with the old kubelet: that is a restart.
		if old := findContainerStatus(pod.Status.ContainerStatuses, c.Name); old != nil {
			st.restarts = old.RestartCount
			if old.State.Running != nil || old.State.Terminated != nil {
				st.restarts++
			}
			st.last = old.LastTerminationState.Terminated
		}
		pp.containers[c.Name] = st
	}
	p.pods[pod.UID] = pp
	pod = pod.DeepCopy()
	var wg sync.WaitGroup
	wg.Add(len(pod.Spec.Containers) + 1)
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		wg.Wait()
		close(pp.stopped)
	}()
	go func() { defer wg.Done(); p.k.renewTokens(ctx, pod, dir) }()
	for i := range pod.Spec.Containers {
		go func() { defer wg.Done(); p.k.superviseContainer(ctx, pod, &pod.Spec.Containers[i], pp) }()
	}
	p.k.log.Info("Running pod as processes", "pod", key, "dir", dir)
	return pp, nil
}

// stop ends the pod's processes (SIGTERM, then SIGKILL after the grace
// period); the returned channel is closed once they are gone.
func (p *processes) stop(uid types.UID, graceSeconds *int64) <-chan struct{} {
	p.mu.Lock()
	pp := p.pods[uid]
	p.mu.Unlock()
	if pp == nil {
		ch := make(chan struct{})
		close(ch)
		return ch
	}
	if graceSeconds != nil {
		pp.mu.Lock()
		pp.grace = ptr.To(time.Duration(*graceSeconds) * time.Second)
		pp.mu.Unlock()
	}
	pp.cancel()
	return pp.stopped
}

// forget drops a stopped pod and its directory.
func (p *processes) forget(uid types.UID) {
	p.mu.Lock()
	pp := p.pods[uid]
	delete(p.pods, uid)
	p.mu.Unlock()
	if pp != nil {
		_ = os.RemoveAll(pp.dir)
	}
}

// stopAll ends every pod's processes and waits for them, as a stopping
// node does.
func (p *processes) stopAll() {
	p.mu.Lock()
	for _, pp := range p.pods {
		pp.cancel()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (pp *processPod) update(name string, f func(*containerState)) {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	f(pp.containers[name])
}

func (pp *processPod) snapshot() map[string]containerState {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	out := map[string]containerState{}
	for name, st := range pp.containers {
		out[name] = *st
	}
	return out
}

// superviseContainer runs one container as a process until ctx ends,
// restarting it per the pod's restartPolicy with back-off.
func (k *kubelet) superviseContainer(ctx context.Context, pod *corev1.Pod, c *corev1.Container, pp *processPod) {
	log := k.log.WithValues("pod", pp.key, "container", c.Name)
	backoff := backoffInitial
	grace := 30 * time.Second
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		grace = time.Duration(*pod.Spec.TerminationGracePeriodSeconds) * time.Second
	}
	for ctx.Err() == nil {
		if !k.waitToken(ctx, pp.dir) {
			return
		}
		started := time.Now().Truncate(time.Second)
		exit, err := k.runContainer(ctx, pod, c, pp, grace, log)
		if ctx.Err() != nil {
			return
		}
		finished := time.Now().Truncate(time.Second)
		term := &corev1.ContainerStateTerminated{
			ExitCode: int32(exit), Reason: "Error",
			StartedAt: metav1.NewTime(started), FinishedAt: metav1.NewTime(finished),
		}
		if err != nil {
			term.ExitCode, term.Reason, term.Message = 128, "StartError", err.Error()
		} else if exit == 0 {
			term.Reason = "Completed"
		}
		restart := pod.Spec.RestartPolicy == corev1.RestartPolicyAlways || pod.Spec.RestartPolicy == "" ||
			(pod.Spec.RestartPolicy == corev1.RestartPolicyOnFailure && term.ExitCode != 0)
		if finished.Sub(started) >= backoffReset {
			backoff = backoffInitial
		}
		log.Info("Container exited", "exitCode", term.ExitCode, "restart", restart, "backoff", backoff)
		pp.update(c.Name, func(st *containerState) {
			st.running, st.last = false, term
			if restart {
				st.restarts++
				st.waiting, st.waitingMsg = "CrashLoopBackOff", fmt.Sprintf("back-off %s restarting failed container %s", backoff, c.Name)
			} else {
				st.finished = true
			}
		})
		k.queue.Add(pp.key)
		if !restart || !sleep(ctx, backoff) {
			return
		}
		backoff = min(2*backoff, backoffMax)
	}
}

// runContainer starts the process, reports it running, and waits for it to
// exit or for ctx to end, when it is stopped within grace.
func (k *kubelet) runContainer(ctx context.Context, pod *corev1.Pod, c *corev1.Container, pp *processPod, grace time.Duration, log interface {
	Info(string, ...any)
}) (int, error) {
	logFile, err := os.OpenFile(filepath.Join(pp.dir, c.Name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return 0, err
	}
	defer logFile.Close()
	fmt.Fprintf(logFile, "--- %s: starting container %s of pod %s\n", time.Now().Format(time.RFC3339), c.Name, pp.key)
	// The pod passed deploy.CheckLocalManagerPod: no command, no working
	// directory, no environment of its own.
	cmd := exec.Command(k.exe, c.Args...)
	cmd.Dir = pp.dir
	cmd.Env = containerEnv(pod, pp.dir)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Pdeathsig ties the process to the thread that started it; that thread
	// stays locked to this goroutine until the process ends, so the process
	// dies only with the machine (which shares its process group too).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	type result struct {
		code int
		err  error
	}
	startErr := make(chan error, 1)
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			startErr <- err
			return
		}
		startErr <- nil
		err := cmd.Wait()
		var exit *exec.ExitError
		switch {
		case err == nil:
			done <- result{}
		case errors.As(err, &exit):
			code := exit.ExitCode()
			if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				code = 128 + int(ws.Signal())
			}
			done <- result{code: code}
		default:
			done <- result{code: 1, err: err}
		}
	}()
	if err := <-startErr; err != nil {
		return 0, fmt.Errorf("starting %s: %w", k.exe, err)
	}
	log.Info("Container started", "pid", cmd.Process.Pid, "log", logFile.Name())
	pp.update(c.Name, func(st *containerState) {
		st.running, st.startedAt, st.waiting, st.waitingMsg = true, time.Now().Truncate(time.Second), "", ""
	})
	k.queue.Add(pp.key)
	select {
	case r := <-done:
		return r.code, r.err
	case <-ctx.Done():
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	pp.mu.Lock()
	if pp.grace != nil && *pp.grace < grace {
		grace = *pp.grace
	}
	pp.mu.Unlock()
	select {
	case r := <-done:
		return r.code, r.err
	case <-time.After(grace):
		log.Info("Container did not stop within its grace period; killing it", "grace", grace)
		_ = cmd.Process.Kill()
		r := <-done
		return r.code, r.err
	}
}

// containerEnv is the process's environment: nothing of the host's but
// PATH, so neither the plane's HOME nor any of its variables reach the
// process; its HOME is the pod's own directory, and the pod's credentials
// come as KUBECONFIG.
func containerEnv(pod *corev1.Pod, dir string) []string {
	return []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + dir,
		"KUBECONFIG=" + filepath.Join(dir, "kubeconfig"),
		"POD_NAMESPACE=" + pod.Namespace,
		"POD_NAME=" + pod.Name,
	}
}

// waitToken waits until the pod's kubeconfig has been written; it reports
// whether ctx is still live.
func (k *kubelet) waitToken(ctx context.Context, dir string) bool {
	for {
		if _, err := os.Stat(filepath.Join(dir, "kubeconfig")); err == nil {
			return true
		}
		if !sleep(ctx, 200*time.Millisecond) {
			return false
		}
	}
}

// renewTokens keeps the pod's service-account token fresh: requested with
// the node's own credentials, bound to the pod (so it dies with it), and
// written beside a kubeconfig that names it as a token file, which client-go
// re-reads.
func (k *kubelet) renewTokens(ctx context.Context, pod *corev1.Pod, dir string) {
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	retry := time.Second
	for ctx.Err() == nil {
		tr, err := k.client.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{
				ExpirationSeconds: ptr.To(int64(tokenLifetime / time.Second)),
				BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
			},
		}, metav1.CreateOptions{})
		if err == nil {
			err = k.writeCredentials(dir, tr.Status.Token)
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			// The first refusal is common: the API server's node authorizer
			// learns of a new pod a moment after the kubelet does.
			k.log.Error(err, "Requesting a token for the pod's service account failed; will retry", "pod", pod.Namespace+"/"+pod.Name, "serviceAccount", sa, "retryIn", retry)
			if !sleep(ctx, retry) {
				return
			}
			retry = min(2*retry, 30*time.Second)
			continue
		}
		retry = time.Second
		renew := time.Until(tr.Status.ExpirationTimestamp.Time) * 4 / 5
		if !sleep(ctx, max(renew, time.Minute)) {
			return
		}
	}
}

func (k *kubelet) writeCredentials(dir, token string) error {
	if err := atomicfile.WriteFile(filepath.Join(dir, "token"), []byte(token), 0o600); err != nil {
		return err
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if _, err := os.Stat(kubeconfig); err == nil {
		return nil
	}
	ca := k.o.Config.CAData
	if len(ca) == 0 && k.o.Config.CAFile != "" {
		var err error
		if ca, err = os.ReadFile(k.o.Config.CAFile); err != nil {
			return fmt.Errorf("reading the cluster CA %s: %w", k.o.Config.CAFile, err)
		}
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["cluster"] = &clientcmdapi.Cluster{Server: k.o.Config.Host, CertificateAuthorityData: ca}
	cfg.AuthInfos["pod"] = &clientcmdapi.AuthInfo{TokenFile: filepath.Join(dir, "token")}
	cfg.Contexts["pod"] = &clientcmdapi.Context{Cluster: "cluster", AuthInfo: "pod"}
	cfg.CurrentContext = "pod"
	body, err := clientcmd.Write(*cfg)
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(kubeconfig, body, 0o600)
}

// processPodStatus is the status of a pod run as processes: desired's
// addresses and conditions with each container's real state.
func processPodStatus(pod *corev1.Pod, podIP, hostIP string, now metav1.Time, states map[string]containerState) corev1.PodStatus {
	allRunning, allFinished, allSucceeded, anyStarted := true, true, true, false
	for _, c := range pod.Spec.Containers {
		st := states[c.Name]
		anyStarted = anyStarted || st.running || st.last != nil
		allRunning = allRunning && st.running
		allFinished = allFinished && st.finished
		allSucceeded = allSucceeded && st.finished && st.last != nil && st.last.ExitCode == 0
	}
	s := desiredPodStatus(pod, podIP, hostIP, now, allRunning)
	for i := range s.ContainerStatuses {
		cs := &s.ContainerStatuses[i]
		st := states[cs.Name]
		cs.RestartCount = st.restarts
		cs.Ready = st.running
		cs.Started = ptr.To(st.running)
		cs.LastTerminationState = corev1.ContainerState{}
		switch {
		case st.running:
			cs.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(st.startedAt)}}
		case st.finished && st.last != nil:
			cs.State = corev1.ContainerState{Terminated: st.last.DeepCopy()}
		default:
			cs.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: st.waiting, Message: st.waitingMsg}}
		}
		if st.last != nil && !st.finished {
			cs.LastTerminationState = corev1.ContainerState{Terminated: st.last.DeepCopy()}
		}
	}
	if !anyStarted {
		s.Phase = corev1.PodPending
	}
	if allFinished {
		s.Phase = corev1.PodFailed
		if allSucceeded {
			s.Phase = corev1.PodSucceeded
		}
	}
	return s
}
