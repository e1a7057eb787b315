package kubeadmcontrolplane

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"

	"capstan.dev/capstan/internal/etcdclient"
	"capstan.dev/capstan/internal/portforward"
)

// The control plane reaches etcd the only way that works wherever the
// workload cluster runs: through its API server, by a port-forward to each
// member's static Pod kube-system/etcd-<node> (kubeadm names a member after
// its node), with a client certificate from the cluster's etcd CA. Node
// addresses, including the client URLs members advertise, are never
// dialled: a management cluster on another network cannot route to them.

// etcdClientName is the common name of the control plane's etcd client
// certificate.
const etcdClientName = "capstan-kubeadmcontrolplane"

// Time limits of etcd calls: each member's own, so that a dead member
// cannot use up the others' time.
const (
	etcdDialTimeout = 3 * time.Second
	etcdCallTimeout = 5 * time.Second
	etcdMoveTimeout = 10 * time.Second
)

// etcdMember is one member of the workload cluster's etcd.
type etcdMember struct {
	id      uint64
	name    string
	healthy bool
	leader  bool
	problem string
}

type etcdState struct {
	read    bool
	members []etcdMember
	err     error
}

func (e etcdState) member(name string) *etcdMember {
	for i := range e.members {
		if e.members[i].name == name {
			return &e.members[i]
		}
	}
	return nil
}

// etcdPodName is the static Pod of the member named after node.
func etcdPodName(node string) string { return "etcd-" + node }

// etcdPods are the names of the etcd Pods bound to a node, those of
// Machines that stay first (the ones leaving may be gone any moment).
func etcdPods(s *scope, pods []corev1.Pod) []string {
	leaving := map[string]bool{}
	for _, m := range s.machines {
		if !m.machine.DeletionTimestamp.IsZero() {
			leaving[etcdPodName(m.nodeName())] = true
		}
	}
	var names []string
	for _, p := range pods {
		if p.Labels["component"] == "etcd" && p.Spec.NodeName != "" {
			names = append(names, p.Name)
		}
	}
	sort.Slice(names, func(i, j int) bool {
		if leaving[names[i]] != leaving[names[j]] {
			return !leaving[names[i]]
		}
		return names[i] < names[j]
	})
	return names
}

// connectEtcd is a client of the member behind one etcd Pod.
func (r *Reconciler) connectEtcd(ctx context.Context, s *scope, dialer *portforward.Dialer, pod string) (*etcdclient.Member, error) {
	return etcdclient.ForPod(ctx, etcdclient.PodConfig{
		Dialer:       dialer,
		Namespace:    metav1NamespaceSystem,
		Pod:          pod,
		CA:           s.certs.EtcdCA,
		KeyAlgorithm: keyAlgorithm(s.kcp),
		CommonName:   etcdClientName,
		DialTimeout:  etcdDialTimeout,
	})
}

// readEtcd lists etcd's members through the first etcd Pod that answers,
// then asks each member, through its own Pod, whether it is healthy and
// whether it leads.
func (r *Reconciler) readEtcd(ctx context.Context, s *scope, pods []corev1.Pod) etcdState {
	dialer := s.podDialer
	candidates := etcdPods(s, pods)
	if len(candidates) == 0 {
		return etcdState{err: errors.New("cannot reach etcd: no etcd Pod (kube-system, component=etcd) is bound to a node")}
	}
	clients := map[string]*etcdclient.Member{}
	defer func() {
		for _, c := range clients {
			_ = c.Close()
		}
	}()
	var members []*pb.Member
	var failures []string
	for _, pod := range candidates {
		cli, err := r.connectEtcd(ctx, s, dialer, pod)
		if err != nil {
			failures = append(failures, err.Error())
			continue
		}
		clients[pod] = cli
		listCtx, cancel := context.WithTimeout(ctx, etcdCallTimeout)
		list, err := cli.MemberList(listCtx)
		cancel()
		if err != nil {
			failures = append(failures, fmt.Sprintf("listing etcd members through %s: %s", cli.Pod, etcdError(err)))
			continue
		}
		members = list.Members
		break
	}
	if members == nil {
		return etcdState{err: fmt.Errorf("cannot list etcd's members: %s", strings.Join(failures, "; "))}
	}

	st := etcdState{read: true, members: make([]etcdMember, len(members))}
	var wg sync.WaitGroup
	for i, m := range members {
		em := &st.members[i]
		*em = etcdMember{id: m.ID, name: m.Name}
		switch {
		case m.IsLearner:
			em.problem = "is a learner"
			continue
		case m.Name == "":
			// A member is named when it starts. Its client URLs are not
			// asked for: the Pod is reached by port-forward, and etcd
			// implementations that answer for a member (upstream's
			// simulated one) need not list them.
			em.problem = "has not started"
			continue
		}
		pod := etcdPodName(m.Name)
		cli := clients[pod]
		if cli == nil {
			var err error
			if cli, err = r.connectEtcd(ctx, s, dialer, pod); err != nil {
				em.problem = err.Error()
				continue
			}
			clients[pod] = cli
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			em.healthy, em.leader, em.problem = memberStatus(ctx, cli, m.ID)
		}()
	}
	wg.Wait()
	return st
}

// memberStatus asks the member behind cli for its status, on the
// client's own connection (clientv3's Status dials the endpoint anew).
func memberStatus(ctx context.Context, cli *etcdclient.Member, id uint64) (healthy, leader bool, problem string) {
	ctx, cancel := context.WithTimeout(ctx, etcdCallTimeout)
	defer cancel()
	res, err := pb.NewMaintenanceClient(cli.ActiveConnection()).Status(ctx, &pb.StatusRequest{})
	switch {
	case err != nil:
		return false, false, "cannot be reached: " + etcdError(err)
	case res.Header != nil && res.Header.MemberId != 0 && res.Header.MemberId != id:
		// The Pod is not this member's: not a kubeadm-made member, or a
		// Pod left from a machine that had the same name. (An answer
		// without a header cannot tell; the Pod's name matched.)
		return false, false, fmt.Sprintf("is not the member behind Pod %s", cli.Pod)
	case len(res.Errors) > 0:
		return false, false, strings.Join(res.Errors, "; ")
	}
	return true, res.Leader == id, ""
}

// removeEtcdMember takes member out of etcd: leadership moves to another
// healthy member first when member leads, then a healthy member removes it.
func (r *Reconciler) removeEtcdMember(ctx context.Context, s *scope, member *etcdMember) error {
	var target *etcdMember
	for i := range s.etcd.members {
		if o := &s.etcd.members[i]; o.id != member.id && o.healthy {
			target = o
			break
		}
	}
	if target == nil || s.podDialer == nil {
		return errors.New("no other healthy etcd member to remove it through")
	}
	ctx, cancel := context.WithTimeout(ctx, etcdMoveTimeout)
	defer cancel()
	if member.leader {
		// Only the leader can hand its leadership over.
		leader, err := r.connectEtcd(ctx, s, s.podDialer, etcdPodName(member.name))
		if err != nil {
			return err
		}
		_, err = leader.MoveLeader(ctx, target.id)
		_ = leader.Close()
		if err != nil {
			return fmt.Errorf("moving etcd leadership from %s to %s: %s", member.name, target.name, etcdError(err))
		}
	}
	cli, err := r.connectEtcd(ctx, s, s.podDialer, etcdPodName(target.name))
	if err != nil {
		return err
	}
	defer cli.Close()
	if _, err := cli.MemberRemove(ctx, member.id); err != nil && !strings.Contains(err.Error(), "member not found") {
		return fmt.Errorf("removing etcd member %s through %s: %s", member.name, cli.Pod, etcdError(err))
	}
	return nil
}

// etcdError is the cause of a failed etcd call without gRPC's wrapping: a
// port-forward's own error (the Pod is missing, its node's kubelet cannot
// be reached, nothing listens) when that is what failed.
func etcdError(err error) string {
	msg := err.Error()
	if st, ok := status.FromError(err); ok {
		msg = st.Message()
	}
	if i := strings.Index(msg, "cannot port-forward"); i >= 0 {
		msg = strings.TrimRight(msg[i:], `"`)
	}
	return msg
}
