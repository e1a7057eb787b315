package mgmt

import (
	"context"
	"net"
	"strconv"

	"k8s.io/client-go/rest"

	"capstan.dev/capstan/internal/embedded"
)

// serviceAccountIssuer is the issuer of the service account tokens the plane
// signs. It is fixed: tokens issued before a restart stay valid after it.
const serviceAccountIssuer = "https://kubernetes.default.svc.cluster.local"

// apiServerArgs are the kube-apiserver flags of the embedded plane, spelled
// as a user of kube-apiserver would write them; passing them through the
// server's own flag set keeps every default the server documents.
func apiServerArgs(dir StateDir, ports Ports) []string {
	p := dir.pki()
	return []string{
		"--etcd-servers=https://127.0.0.1:" + strconv.Itoa(ports.EtcdClient),
		"--etcd-cafile=" + p.etcdCACert(),
		"--etcd-certfile=" + p.certFile(etcdClient),
		"--etcd-keyfile=" + p.keyFile(etcdClient),
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(ports.APIServer),
		"--cert-dir=" + dir.apiserverDir(),
		"--tls-cert-file=" + p.certFile(apiServerServing),
		"--tls-private-key-file=" + p.keyFile(apiServerServing),
		"--client-ca-file=" + p.caCert(),
		"--kubelet-client-certificate=" + p.certFile(kubeletClient),
		"--kubelet-client-key=" + p.keyFile(kubeletClient),
		// Kubelets on this host report 127.0.0.1 and a node name that no
		// resolver knows.
		"--kubelet-preferred-address-types=InternalIP,ExternalIP,Hostname",
		"--service-account-issuer=" + serviceAccountIssuer,
		"--service-account-key-file=" + p.serviceAccountPub(),
		"--service-account-signing-key-file=" + p.serviceAccountKey(),
		"--authorization-mode=RBAC",
		// Secrets are encrypted before they reach etcd's files.
		"--encryption-provider-config=" + p.encryptionConfig(),
		"--service-cluster-ip-range=10.96.0.0/12",
		// The plane serves on loopback only; there is no Service network
		// behind it for the kubernetes Service's endpoints to point at.
		"--endpoint-reconciler-type=none",
		"--profiling=false",
	}
}

// runAPIServer starts kube-apiserver on the given, already-bound listener and
// returns once it answers /readyz. The returned channel yields the server's
// exit error (nil on a clean shutdown) after ctx is cancelled.
func runAPIServer(ctx context.Context, dir StateDir, ports Ports, listener net.Listener, admin *rest.Config) (<-chan error, error) {
	return embedded.RunAPIServer(ctx, apiServerArgs(dir, ports), listener, admin)
}
