package controlplane

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"capstan.dev/capstan/internal/certs"
	"capstan.dev/capstan/internal/etcdclient"
)

// AddEtcdMember adds a member called name with peerURL to the etcd cluster
// reachable at clientURLs, for a control-plane join, and returns the
// --initial-cluster value the new member starts with (EtcdInitialCluster).
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
	// Serializable: right after MemberAdd the cluster has lost its quorum
	// until the new member starts, and a retried join must still be able
	// to see its own member.
	list, err := cli.MemberList(ctx, clientv3.WithSerializable())
	if err != nil {
		return "", fmt.Errorf("listing etcd members at %s: %w", strings.Join(clientURLs, ","), err)
	}
	members := list.Members
	if !slices.ContainsFunc(members, func(m *etcdMember) bool { return slices.Contains(m.PeerURLs, peerURL) }) {
		added, err := cli.MemberAdd(ctx, []string{peerURL})
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

// etcdClient connects to etcd with a short-lived client certificate from the
// etcd CA in p.
func etcdClient(ctx context.Context, p pki, alg certs.KeyAlgorithm, endpoints []string) (*clientv3.Client, error) {
	ca, err := p.loadCA(etcdCA)
	if err != nil {
		return nil, err
	}
	return etcdclient.New(ctx, ca, alg, endpoints, "capstan-etcd-join", 10*time.Second, nil)
}
