package mgmt

import (
	"context"
	"net/url"
	"strconv"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"

	"capstan.dev/capstan/internal/embedded"
)

// etcdMemberName is the plane's one etcd member; a restore rebuilds the
// membership under the same name.
const etcdMemberName = "capstan"

// startEtcd runs a single-member etcd over TLS with client-certificate
// authentication by certificates of the etcd CA only, so that nothing on
// the host but the API server can read the objects (secrets included) it
// stores: not even a client certificate of the plane's own CA.
func startEtcd(ctx context.Context, dir StateDir, ports Ports, logLevel string) (*embed.Etcd, error) {
	p := dir.pki()
	tls := transport.TLSInfo{
		CertFile:       p.certFile(etcdServing),
		KeyFile:        p.keyFile(etcdServing),
		TrustedCAFile:  p.etcdCACert(),
		ClientCertAuth: true,
	}
	return embedded.StartEtcd(ctx, embedded.EtcdConfig{
		Name:      etcdMemberName,
		Dir:       dir.etcdDir(),
		ClientURL: loopbackURL("https", ports.EtcdClient),
		PeerURL:   loopbackURL("https", ports.EtcdPeer),
		ClientTLS: tls,
		PeerTLS:   tls,
		LogLevel:  logLevel,
	})
}

func loopbackURL(scheme string, port int) url.URL {
	return url.URL{Scheme: scheme, Host: "127.0.0.1:" + strconv.Itoa(port)}
}
