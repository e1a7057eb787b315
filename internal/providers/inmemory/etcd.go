package inmemory

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"sync"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
)

// etcdCluster is a simulated cluster's etcd membership: what
// KubeadmControlPlane asks etcd (members, each member's status and leader,
// leadership moves, member removal, alarms) answered from memory.
type etcdCluster struct {
	mu        sync.Mutex
	clusterID uint64
	nextID    uint64
	members   []*etcdMember
	leader    uint64
	revision  int64
}

type etcdMember struct {
	id        uint64
	name      string
	clientURL string
	peerURL   string
	server    *grpc.Server
	listener  *pipeListener
}

func newEtcdCluster(seed uint64) *etcdCluster {
	return &etcdCluster{clusterID: seed | 1, nextID: seed<<8 | 1}
}

// addMember starts a gRPC endpoint for a new member named name (the node
// name, as kubeadm names members) and returns the client URL it
// advertises. The endpoint listens on no port: as on a cloud, the only way
// in is a port-forward to the member's Pod through the cluster's API
// server (connect). tlsConfig serves the member's certificate and requires
// clients from the etcd CA.
func (e *etcdCluster) addMember(name, host string, tlsConfig *tls.Config) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, m := range e.members {
		if m.name == name {
			return m.clientURL
		}
	}
	id := e.nextID
	e.nextID++
	// What kubeadm's etcd advertises: the node's address, etcd's ports.
	m := &etcdMember{id: id, name: name, listener: newPipeListener(name),
		clientURL: "https://" + net.JoinHostPort(host, "2379"), peerURL: "https://" + net.JoinHostPort(host, "2380")}
	m.server = grpc.NewServer(grpc.Creds(credentials.NewTLS(tlsConfig)))
	srv := &etcdEndpoint{cluster: e, self: id}
	pb.RegisterClusterServer(m.server, srv)
	pb.RegisterMaintenanceServer(m.server, srv)
	go func() { _ = m.server.Serve(m.listener) }()
	e.members = append(e.members, m)
	if e.leader == 0 {
		e.leader = id
	}
	e.revision++
	return m.clientURL
}

// connect opens a connection to the client endpoint of the member named
// name, as a port-forward to its Pod reaches it.
func (e *etcdCluster) connect(name string) (net.Conn, error) {
	e.mu.Lock()
	var member *etcdMember
	for _, m := range e.members {
		if m.name == name {
			member = m
		}
	}
	e.mu.Unlock()
	if member == nil {
		return nil, fmt.Errorf("etcd member %s is not running", name)
	}
	return member.listener.dial()
}

// removeMember stops a member's endpoint and takes it out of the
// membership, as MemberRemove or the machine's deletion does.
func (e *etcdCluster) removeMember(id uint64) bool {
	e.mu.Lock()
	var gone *etcdMember
	for i, m := range e.members {
		if m.id == id {
			gone = m
			e.members = append(e.members[:i:i], e.members[i+1:]...)
			break
		}
	}
	if gone != nil && e.leader == id {
		e.leader = 0
		if len(e.members) > 0 {
			e.leader = e.members[0].id
		}
	}
	e.revision++
	e.mu.Unlock()
	if gone == nil {
		return false
	}
	// Stop in the background: the request removing this very member may be
	// served by it.
	go gone.server.Stop()
	return true
}

func (e *etcdCluster) memberByName(name string) uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, m := range e.members {
		if m.name == name {
			return m.id
		}
	}
	return 0
}

func (e *etcdCluster) close() {
	e.mu.Lock()
	members := e.members
	e.members = nil
	e.mu.Unlock()
	for _, m := range members {
		m.server.Stop()
	}
}

// etcdEndpoint is the gRPC face of one member.
type etcdEndpoint struct {
	pb.UnimplementedClusterServer
	pb.UnimplementedMaintenanceServer
	cluster *etcdCluster
	self    uint64
}

func (s *etcdEndpoint) header() *pb.ResponseHeader {
	return &pb.ResponseHeader{ClusterId: s.cluster.clusterID, MemberId: s.self, Revision: s.cluster.revision, RaftTerm: 2}
}

func (s *etcdEndpoint) members() []*pb.Member {
	var out []*pb.Member
	for _, m := range s.cluster.members {
		out = append(out, &pb.Member{ID: m.id, Name: m.name, PeerURLs: []string{m.peerURL}, ClientURLs: []string{m.clientURL}})
	}
	return out
}

func (s *etcdEndpoint) MemberList(context.Context, *pb.MemberListRequest) (*pb.MemberListResponse, error) {
	s.cluster.mu.Lock()
	defer s.cluster.mu.Unlock()
	return &pb.MemberListResponse{Header: s.header(), Members: s.members()}, nil
}

func (s *etcdEndpoint) MemberRemove(_ context.Context, r *pb.MemberRemoveRequest) (*pb.MemberRemoveResponse, error) {
	if !s.cluster.removeMember(r.ID) {
		return nil, status.Error(codes.NotFound, "etcdserver: member not found")
	}
	s.cluster.mu.Lock()
	defer s.cluster.mu.Unlock()
	return &pb.MemberRemoveResponse{Header: s.header(), Members: s.members()}, nil
}

func (s *etcdEndpoint) Status(context.Context, *pb.StatusRequest) (*pb.StatusResponse, error) {
	s.cluster.mu.Lock()
	defer s.cluster.mu.Unlock()
	return &pb.StatusResponse{Header: s.header(), Version: "3.6.5", Leader: s.cluster.leader, RaftIndex: uint64(s.cluster.revision), RaftTerm: 2, RaftAppliedIndex: uint64(s.cluster.revision), DbSize: 1 << 20, DbSizeInUse: 1 << 20}, nil
}

func (s *etcdEndpoint) MoveLeader(_ context.Context, r *pb.MoveLeaderRequest) (*pb.MoveLeaderResponse, error) {
	s.cluster.mu.Lock()
	defer s.cluster.mu.Unlock()
	if s.cluster.leader != s.self {
		return nil, status.Error(codes.FailedPrecondition, "etcdserver: not leader")
	}
	for _, m := range s.cluster.members {
		if m.id == r.TargetID {
			s.cluster.leader = r.TargetID
			return &pb.MoveLeaderResponse{Header: s.header()}, nil
		}
	}
	return nil, status.Error(codes.NotFound, "etcdserver: bad leader transferee")
}

func (s *etcdEndpoint) Alarm(context.Context, *pb.AlarmRequest) (*pb.AlarmResponse, error) {
	s.cluster.mu.Lock()
	defer s.cluster.mu.Unlock()
	return &pb.AlarmResponse{Header: s.header()}, nil
}

// pipeListener hands the server end of in-process connections to a gRPC
// server: a member's endpoint without a port.
type pipeListener struct {
	name   string
	conns  chan net.Conn
	done   chan struct{}
	closed sync.Once
}

func newPipeListener(name string) *pipeListener {
	return &pipeListener{name: name, conns: make(chan net.Conn), done: make(chan struct{})}
}

// dial returns the client end of a new connection, once the server has
// taken the other.
func (l *pipeListener) dial() (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.done:
		client.Close()
		server.Close()
		return nil, fmt.Errorf("etcd member %s has stopped", l.name)
	}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.closed.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr(l.name) }

type pipeAddr string

func (a pipeAddr) Network() string { return "pipe" }
func (a pipeAddr) String() string  { return "etcd-" + string(a) }
