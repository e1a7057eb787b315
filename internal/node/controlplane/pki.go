package controlplane

import (
	"bytes"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"

	"capstan.dev/capstan/internal/certs"
)

// renewBefore is how close to expiry a leaf is re-issued at start-up.
const renewBefore = 30 * 24 * time.Hour

// pki names the files of a kubeadm-style pki directory.
type pki string

func (p pki) path(name string) string { return filepath.Join(string(p), name) }

func (p pki) crt(name string) string { return p.path(name + ".crt") }
func (p pki) key(name string) string { return p.path(name + ".key") }

// The CAs, written by cloud-init from the cluster's certificate secrets.
const (
	clusterCA    = "ca"
	etcdCA       = "etcd/ca"
	frontProxyCA = "front-proxy-ca"
)

// leaf is a certificate the machine issues itself from one of the CAs.
type leaf struct {
	name string // file stem under the pki directory
	ca   string
	req  certs.Request
}

// leaves are kubeadm's leaf certificates for a control-plane machine.
func (c *Config) leaves() []leaf {
	loopback := []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	etcdNames := []string{"localhost", c.NodeName}
	leaves := []leaf{
		{"apiserver", clusterCA, certs.Request{CommonName: "kube-apiserver", Server: true,
			DNSNames: c.apiServerDNSNames(), IPs: c.apiServerIPs()}},
		{"apiserver-kubelet-client", clusterCA, certs.Request{CommonName: "kube-apiserver-kubelet-client",
			Organization: []string{"system:masters"}, Client: true}},
		{"apiserver-etcd-client", etcdCA, certs.Request{CommonName: "kube-apiserver-etcd-client", Client: true}},
		{"front-proxy-client", frontProxyCA, certs.Request{CommonName: "front-proxy-client", Client: true}},
		{"etcd/server", etcdCA, certs.Request{CommonName: c.NodeName, Server: true, Client: true, DNSNames: etcdNames, IPs: loopback}},
		{"etcd/peer", etcdCA, certs.Request{CommonName: c.NodeName, Server: true, Client: true, DNSNames: etcdNames, IPs: loopback}},
		{"etcd/healthcheck-client", etcdCA, certs.Request{CommonName: "kube-etcd-healthcheck-client", Client: true}},
	}
	for i := range leaves {
		leaves[i].req.KeyAlgorithm = c.KeyAlgorithm
	}
	return leaves
}

func (c *Config) apiServerDNSNames() []string {
	names := []string{"localhost", c.NodeName, "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}
	for _, s := range append(c.CertSANs, c.endpointHost()) {
		if s != "" && net.ParseIP(s) == nil && !slices.Contains(names, s) {
			names = append(names, s)
		}
	}
	return names
}

func (c *Config) apiServerIPs() []net.IP {
	ips := []net.IP{net.IPv4(127, 0, 0, 1)}
	if first, err := firstIP(c.ServiceSubnet); err == nil {
		ips = append(ips, first)
	}
	for _, s := range append(append(c.CertSANs, c.endpointHost()), c.AdvertiseAddress) {
		if ip := net.ParseIP(s); ip != nil && !slices.ContainsFunc(ips, ip.Equal) {
			ips = append(ips, ip)
		}
	}
	return ips
}

func (c *Config) endpointHost() string {
	host, _, err := net.SplitHostPort(c.ControlPlaneEndpoint)
	if err != nil {
		return c.ControlPlaneEndpoint
	}
	return host
}

// firstIP is the first address of a CIDR: the kubernetes Service's cluster IP.
func firstIP(cidr string) (net.IP, error) {
	_, n, err := net.ParseCIDR(cidr)
	if err != nil {
		return nil, err
	}
	ip := slices.Clone(n.IP)
	ip[len(ip)-1]++
	return ip, nil
}

// loadCA reads one of the CAs; a missing one means the bootstrap data did not
// carry the cluster's certificates.
func (p pki) loadCA(name string) (*certs.KeyPair, error) {
	ca, err := certs.Load(p.crt(name), p.key(name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("CA %s.crt/%s.key is missing from %s; the bootstrap data of a control-plane machine must write the cluster certificates there", name, name, p)
	}
	if err != nil {
		return nil, fmt.Errorf("CA %s in %s: %w", name, p, err)
	}
	return ca, nil
}

// ensureLeaves issues every leaf that is missing, expiring, signed by
// another CA or lacking a name it must carry, and leaves the rest alone.
func (c *Config) ensureLeaves(p pki, now time.Time) error {
	cas := map[string]*certs.KeyPair{}
	for _, name := range []string{clusterCA, etcdCA, frontProxyCA} {
		ca, err := p.loadCA(name)
		if err != nil {
			return err
		}
		cas[name] = ca
	}
	if _, err := os.Stat(p.path("sa.key")); err != nil {
		return fmt.Errorf("service account key sa.key is missing from %s: %w", p, err)
	}
	for _, l := range c.leaves() {
		ca := cas[l.ca]
		if kp, err := certs.Load(p.crt(l.name), p.key(l.name)); err == nil && current(kp, ca, l.req, now) {
			continue
		}
		kp, err := ca.Issue(l.req, now)
		if err != nil {
			return fmt.Errorf("issuing %s: %w", l.name, err)
		}
		if err := kp.Write(p.crt(l.name), p.key(l.name)); err != nil {
			return fmt.Errorf("writing %s: %w", l.name, err)
		}
	}
	return nil
}

// current reports whether kp can stay: signed by ca, valid for a while, and
// carrying every name and address req asks for.
func current(kp, ca *certs.KeyPair, req certs.Request, now time.Time) bool {
	// A leaf cannot outlive its CA: one that lasts as long as the CA is as
	// good as a new one would be.
	lastsAsCA := !kp.Cert.NotAfter.Before(ca.Cert.NotAfter) && kp.ValidFor(now, 0)
	if !(kp.ValidFor(now, renewBefore) || lastsAsCA) || !bytes.Equal(kp.Cert.RawIssuer, ca.Cert.RawSubject) {
		return false
	}
	if err := kp.Cert.CheckSignatureFrom(ca.Cert); err != nil {
		return false
	}
	for _, name := range req.DNSNames {
		if !slices.Contains(kp.Cert.DNSNames, name) {
			return false
		}
	}
	for _, ip := range req.IPs {
		if !slices.ContainsFunc(kp.Cert.IPAddresses, ip.Equal) {
			return false
		}
	}
	return kp.Cert.Subject.CommonName == req.CommonName && hasUsage(kp.Cert, req)
}

func hasUsage(cert *x509.Certificate, req certs.Request) bool {
	if req.Server && !slices.Contains(cert.ExtKeyUsage, x509.ExtKeyUsageServerAuth) {
		return false
	}
	if req.Client && !slices.Contains(cert.ExtKeyUsage, x509.ExtKeyUsageClientAuth) {
		return false
	}
	return true
}
