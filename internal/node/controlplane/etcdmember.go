package controlplane

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/etcdserver/api/membership"

	"capstan.dev/capstan/internal/certs"
	"capstan.dev/capstan/internal/etcdclient"
)

// AddEtcdMember adds a member called name with peerURL to the etcd cluster
// reachable at clientURLs, for a control-plane join, and returns the
// --initial-cluster value the new member starts with (EtcdInitialCluster).
// The member is added as a learner, as kubeadm does: a learner does not
// count towards the quorum, so the cluster keeps serving while the new
// member starts and catches up (a voting member added to a cluster of one
// would stop it until then); Start promotes it once it has caught up.
// It is idempotent: when a member with that peer URL exists already (an
// earlier attempt added it), it is kept. It talks to etcd with a client
// certificate it issues from pkiDir's etcd CA with a key of algorithm alg,
// since the joining machine has no leaf certificates yet.
func AddEtcdMember(ctx context.Context, pkiDir string, alg certs.KeyAlgorithm, clientURLs []string, name, peerURL string) (initialCluster string, err error) {
	cli, err := etcdClient(ctx, pki(pkiDir), alg, clientURLs)
	if err != nil {
		return "", err
	}
	defer cli.Close()

	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	// Serializable: a retried join must see its own member even when the
	// cluster cannot answer a linearizable read.
	list, err := cli.MemberList(ctx, clientv3.WithSerializable())
	if err != nil {
		return "", fmt.Errorf("listing etcd members at %s: %w", strings.Join(clientURLs, ","), err)
	}
	members := list.Members
	if !slices.ContainsFunc(members, func(m *etcdMember) bool { return slices.Contains(m.PeerURLs, peerURL) }) {
		added, err := cli.MemberAddAsLearner(ctx, []string{peerURL})
		if err != nil {
			return "", fmt.Errorf("adding etcd member %s (%s): %w", name, peerURL, err)
		}
		members = added.Members
	}

	var parts []string
	for _, m := range members {
		memberName := m.Name
		if slices.Contains(m.PeerURLs, peerURL) {
			memberName = name
		} else if memberName == "" {
			// Added by another join that has not started yet: etcd needs
			// every member's name in --initial-cluster.
			return "", fmt.Errorf("etcd member %x (%s) was added but has not started yet; retry the join once it has", m.ID, strings.Join(m.PeerURLs, ","))
		}
		for _, u := range m.PeerURLs {
			parts = append(parts, memberName+"="+u)
		}
	}
	slices.Sort(parts)
	return strings.Join(parts, ","), nil
}

type etcdMember = etcdserverpb.Member

// learnerPromoteInterval is how often a learner asks to be promoted while
// the leader finds it behind.
const learnerPromoteInterval = 500 * time.Millisecond

// promoteLearner makes the local member, when it is a learner (a join's
// AddEtcdMember added it so), a voting member once the leader finds it in
// sync; until then etcd refuses the promotion, and it is asked again. The
// member's own server forwards the request to the leader, so a machine that
// restarts before its promotion needs no other member's address.
func promoteLearner(ctx context.Context, e *embed.Etcd, log logr.Logger) error {
	id := uint64(e.Server.MemberID())
	for e.Server.IsLearner() {
		_, err := e.Server.PromoteMember(ctx, id)
		switch {
		case err == nil, errors.Is(err, membership.ErrMemberNotLearner):
			log.Info("etcd learner promoted to a voting member", "member", e.Server.MemberID().String())
			return nil
		case ctx.Err() != nil:
			return fmt.Errorf("promoting etcd learner %s to a voting member: %w (last error: %v)", e.Server.MemberID(), ctx.Err(), err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(learnerPromoteInterval):
		}
	}
	return nil
}

// etcdClient connects to etcd with a short-lived client certificate from the
// etcd CA in p.
func etcdClient(ctx context.Context, p pki, alg certs.KeyAlgorithm, endpoints []string) (*clientv3.Client, error) {
	ca, err := p.loadCA(etcdCA)
	if err != nil {
		return nil, err
	}
	return etcdclient.New(ctx, ca, alg, endpoints, "capstan-etcd-join", 10*time.Second, nil)
}
