package kubeadmcontrolplane

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	bootstrapv1 "capstan.dev/capstan/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "capstan.dev/capstan/api/controlplane/kubeadm/v1beta2"
	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/certs"
	"capstan.dev/capstan/internal/portforward"
	"capstan.dev/capstan/internal/workload"
)

// Names kubeadm gives things in a workload cluster.
const (
	kubeadmConfigMap          = "kubeadm-config"
	leaveLoadBalancerDeadline = 30 * time.Second
)

// controlPlaneComponents are the mirror Pods each control-plane node has.
var controlPlaneComponents = []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "etcd"}

// componentHealth is what a node's control-plane Pods say.
type componentHealth struct {
	problems []string
	seen     bool
}

func (h componentHealth) healthy() bool { return h.seen && len(h.problems) == 0 }

// readWorkload reads what the workload cluster says about its control
// plane: whether kubeadm init finished, the health of every node's
// control-plane Pods, and etcd's members.
func (r *Reconciler) readWorkload(ctx context.Context, s *scope) (time.Duration, error) {
	if s.certs == nil || len(s.machines) == 0 {
		return 0, nil
	}
	key := client.ObjectKeyFromObject(s.cluster)
	c, err := r.Workload.GetClient(ctx, key)
	if err != nil {
		s.workloadErr = err
		return unsettledRetry, nil
	}
	s.workload = c
	if err := r.Workload.Watch(ctx, key, workload.WatchInput{
		Name:    "kubeadmcontrolplane/pods",
		Watcher: r.controller,
		Kind:    &corev1.Pod{},
		Handler: handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: client.ObjectKeyFromObject(s.kcp)}}
		}),
		Predicates: []predicate.Predicate{predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetNamespace() == metav1NamespaceSystem && o.GetLabels()["tier"] == "control-plane"
		})},
	}); err != nil {
		return 0, err
	}

	s.initialized = ptrTrue(s.kcp.Status.Initialization.ControlPlaneInitialized)
	if !s.initialized {
		reader, err := r.Workload.GetReader(ctx, key)
		if err != nil {
			s.workloadErr = err
			return unsettledRetry, nil
		}
		cm := &corev1.ConfigMap{}
		switch err := reader.Get(ctx, client.ObjectKey{Namespace: metav1NamespaceSystem, Name: kubeadmConfigMap}, cm); {
		case err == nil:
			s.initialized = true
		case apierrors.IsNotFound(err):
			return unsettledRetry, nil
		default:
			s.workloadErr = err
			return unsettledRetry, nil
		}
	}

	pods := &corev1.PodList{}
	if err := c.List(ctx, pods, client.InNamespace(metav1NamespaceSystem), client.MatchingLabels{"tier": "control-plane"}); err != nil {
		s.workloadErr = err
		return unsettledRetry, nil
	}
	s.components = componentsByNode(pods.Items)
	cfg, err := r.Workload.GetRESTConfig(ctx, key)
	if err == nil {
		s.podDialer, err = portforward.NewDialer(cfg)
	}
	if err != nil {
		s.etcd = etcdState{err: fmt.Errorf("cannot reach etcd: %w", err)}
		return unsettledRetry, nil
	}
	s.etcd = r.readEtcd(ctx, s, pods.Items)
	return 0, r.recordCertificateExpiry(ctx, s, pods.Items)
}

// recordCertificateExpiry notes on each Machine when its API server's
// serving certificate expires (Cluster API's certificates-expiry
// annotation), read once from the certificate the server presents through
// a port-forward to its Pod, on the port kubeadm binds it to; the
// rollout's certificatesExpiryDays compares against it.
func (r *Reconciler) recordCertificateExpiry(ctx context.Context, s *scope, pods []corev1.Pod) error {
	apiServers := map[string]string{}
	for _, p := range pods {
		if p.Labels["component"] == "kube-apiserver" && p.Spec.NodeName != "" {
			apiServers[p.Spec.NodeName] = p.Name
		}
	}
	var errs []error
	for _, m := range s.machines {
		if _, ok := m.machine.Annotations[clusterv1.MachineCertificatesExpiryDateAnnotation]; ok || !m.machine.DeletionTimestamp.IsZero() {
			continue
		}
		pod := apiServers[m.nodeName()]
		if pod == "" {
			continue
		}
		expiry, err := servingCertificateExpiry(ctx, s.podDialer, pod, apiServerBindPort(m.config), s.certs.CA)
		if err != nil {
			// The machine may still be starting; the next look tries again.
			continue
		}
		before := m.machine.DeepCopy()
		if m.machine.Annotations == nil {
			m.machine.Annotations = map[string]string{}
		}
		m.machine.Annotations[clusterv1.MachineCertificatesExpiryDateAnnotation] = expiry.UTC().Format(time.RFC3339)
		if err := r.writer().Patch(ctx, m.machine, client.MergeFrom(before)); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	return kerrors.NewAggregate(errs)
}

// apiServerBindPort is the port the Machine's kubeadm configuration binds
// its API server to: kubeadm's 6443 unless it says otherwise.
func apiServerBindPort(config *bootstrapv1.KubeadmConfig) int {
	if config != nil {
		if p := config.Spec.InitConfiguration.LocalAPIEndpoint.BindPort; p != 0 {
			return int(p)
		}
		if jcp := config.Spec.JoinConfiguration.ControlPlane; jcp != nil && jcp.LocalAPIEndpoint.BindPort != 0 {
			return int(jcp.LocalAPIEndpoint.BindPort)
		}
	}
	return 6443
}

// servingCertificateExpiry is when the certificate the API server of Pod
// kube-system/pod presents on port expires.
func servingCertificateExpiry(ctx context.Context, dialer *portforward.Dialer, pod string, port int, ca *certs.KeyPair) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	raw, err := dialer.Dial(ctx, metav1NamespaceSystem, pod, port)
	if err != nil {
		return time.Time{}, err
	}
	return certificateExpiry(ctx, raw, ca)
}

// certificateExpiry is when the certificate the TLS server at the other
// end of raw presents expires; raw is closed. The certificate must chain
// to ca; its names are not checked, since only its date is read and
// nothing is sent.
func certificateExpiry(ctx context.Context, raw net.Conn, ca *certs.KeyPair) (time.Time, error) {
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	var leaf *x509.Certificate
	conn := tls.Client(raw, &tls.Config{
		MinVersion:         tls.VersionTLS12,
		InsecureSkipVerify: true, //nolint:gosec // the chain is verified below; the names do not matter
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("no certificate presented")
			}
			intermediates := x509.NewCertPool()
			for _, c := range cs.PeerCertificates[1:] {
				intermediates.AddCert(c)
			}
			if _, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: intermediates}); err != nil {
				return err
			}
			leaf = cs.PeerCertificates[0]
			return nil
		},
	})
	defer conn.Close()
	if err := conn.HandshakeContext(ctx); err != nil {
		return time.Time{}, err
	}
	return leaf.NotAfter, nil
}

const metav1NamespaceSystem = "kube-system"

func componentsByNode(pods []corev1.Pod) map[string]componentHealth {
	byNode := map[string]map[string]*corev1.Pod{}
	for i := range pods {
		p := &pods[i]
		comp := p.Labels["component"]
		if p.Spec.NodeName == "" || comp == "" {
			continue
		}
		if byNode[p.Spec.NodeName] == nil {
			byNode[p.Spec.NodeName] = map[string]*corev1.Pod{}
		}
		byNode[p.Spec.NodeName][comp] = p
	}
	out := map[string]componentHealth{}
	for node, comps := range byNode {
		h := componentHealth{seen: true}
		for _, comp := range controlPlaneComponents {
			p, ok := comps[comp]
			switch {
			case !ok:
				h.problems = append(h.problems, comp+" Pod is missing")
			case !podReady(p):
				h.problems = append(h.problems, comp+" Pod is not ready")
			}
		}
		out[node] = h
	}
	return out
}

func podReady(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// reconcileHooks runs the control plane's pre-terminate hook for each
// Machine that waits at it: leave the load balancer, move etcd leadership
// away, remove the member, lift the hook.
func (r *Reconciler) reconcileHooks(ctx context.Context, s *scope) {
	for _, m := range s.machines {
		if m.machine.DeletionTimestamp.IsZero() {
			continue
		}
		if _, ok := m.machine.Annotations[controlplanev1.PreTerminateHookCleanupAnnotation]; !ok {
			continue
		}
		if !waitingAtPreTerminateHook(m.machine) {
			continue
		}
		done, err := r.cleanUpMachine(ctx, s, m)
		if err != nil {
			s.actionErr = kerrors.NewAggregate([]error{s.actionErr, fmt.Errorf("removing Machine %s from the control plane: %w", m.machine.Name, err)})
			continue
		}
		if !done {
			continue
		}
		before := m.machine.DeepCopy()
		delete(m.machine.Annotations, controlplanev1.PreTerminateHookCleanupAnnotation)
		if err := r.writer().Patch(ctx, m.machine, client.MergeFrom(before)); err != nil && !apierrors.IsNotFound(err) {
			s.actionErr = kerrors.NewAggregate([]error{s.actionErr, err})
			continue
		}
		r.leaveRequested.Delete(m.machine.UID)
		ctrllog.FromContext(ctx).Info("Removed Machine from the control plane", "Machine", m.machine.Name)
	}
}

func waitingAtPreTerminateHook(m *clusterv1.Machine) bool {
	for _, c := range m.Status.Conditions {
		if c.Type == clusterv1.DeletingCondition {
			return c.Reason == clusterv1.MachineDeletingWaitingForPreTerminateHookReason
		}
	}
	return false
}

// cleanUpMachine takes a leaving Machine out of the control plane; it
// reports done once nothing of it is left in etcd.
func (r *Reconciler) cleanUpMachine(ctx context.Context, s *scope, m *machineState) (bool, error) {
	if !s.kcp.DeletionTimestamp.IsZero() || !s.initialized {
		// The whole control plane goes, or never came up: etcd goes with it.
		return true, nil
	}
	if s.workload == nil || s.certs == nil {
		return false, fmt.Errorf("the workload cluster cannot be reached: %v", s.workloadErr)
	}
	if !r.leftLoadBalancer(ctx, s, m) {
		return false, nil
	}
	st := s.etcd
	if st.err != nil {
		return false, st.err
	}
	if !st.read {
		return false, errors.New("etcd's members have not been read yet")
	}
	member := st.member(m.nodeName())
	if member == nil {
		return true, nil
	}
	others := 0
	for _, o := range st.members {
		if o.id != member.id && o.healthy {
			others++
		}
	}
	if others == 0 {
		return false, errors.New("its etcd member is the only healthy one; refusing to remove it")
	}
	if err := r.removeEtcdMember(ctx, s, member); err != nil {
		return false, err
	}
	r.event(s.kcp, m.machine, "Normal", "EtcdMemberRemoved", "Delete", "Removed etcd member %s of Machine %s", member.name, m.machine.Name)
	return true, nil
}

// leftLoadBalancer asks the Machine's Node to leave the control-plane load
// balancer and reports whether it has, or whether waiting is over.
func (r *Reconciler) leftLoadBalancer(ctx context.Context, s *scope, m *machineState) bool {
	nodeName := m.machine.Status.NodeRef.Name
	if nodeName == "" {
		return true
	}
	node := &corev1.Node{}
	if err := s.workload.Get(ctx, client.ObjectKey{Name: nodeName}, node); err != nil {
		return apierrors.IsNotFound(err)
	}
	if node.Annotations[controlplanev1.LoadBalancerLeaverAnnotation] != "true" {
		// Not a machine of Capstan's providers: nothing would answer, and
		// the provider's load balancer checks its API servers itself.
		return true
	}
	if node.Annotations[controlplanev1.LeftLoadBalancerAnnotation] == "true" || !nodeReady(node) {
		// A machine whose kubelet does not report cannot answer, and its
		// API server is not serving either.
		return true
	}
	first, _ := r.leaveRequested.LoadOrStore(m.machine.UID, s.now)
	if s.now.Sub(first.(time.Time)) > leaveLoadBalancerDeadline {
		return true // a dead machine cannot answer
	}
	if node.Annotations[controlplanev1.LeaveLoadBalancerAnnotation] != "true" {
		before := node.DeepCopy()
		if node.Annotations == nil {
			node.Annotations = map[string]string{}
		}
		node.Annotations[controlplanev1.LeaveLoadBalancerAnnotation] = "true"
		if err := s.workload.Patch(ctx, node, client.MergeFrom(before)); err != nil {
			return false
		}
	}
	return false
}

// hookRetry is how soon to look again while a Machine waits at the hook.
func (r *Reconciler) hookRetry(s *scope) time.Duration {
	for _, m := range s.machines {
		if !m.machine.DeletionTimestamp.IsZero() {
			if _, ok := m.machine.Annotations[controlplanev1.PreTerminateHookCleanupAnnotation]; ok {
				return time.Second
			}
		}
	}
	return 0
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
