package webhook

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"time"

	"capstan.dev/capstan/internal/certs"
)

// Keys of the certificate Secret.
const (
	// caBundleKey holds the current authority first, then the previous one
	// while it is still valid: a replica still serving a certificate of the
	// previous authority stays trusted during a renewal.
	caBundleKey = "ca.crt"
	caKeyKey    = "ca.key"
	tlsCertKey  = "tls.crt"
	tlsKeyKey   = "tls.key"
)

// Lifetimes chooses how long certificates live and how early they are
// renewed. The API server trusts what the caBundle holds, so a serving
// certificate is renewed well before it expires and the authority even
// earlier.
type Lifetimes struct {
	CA, CARenewBefore           time.Duration
	Serving, ServingRenewBefore time.Duration
}

// DefaultLifetimes: an authority for ten years renewed a year before its
// end, serving certificates for a year renewed a month before theirs.
var DefaultLifetimes = Lifetimes{
	CA: 10 * 365 * 24 * time.Hour, CARenewBefore: 365 * 24 * time.Hour,
	Serving: 365 * 24 * time.Hour, ServingRenewBefore: 30 * 24 * time.Hour,
}

// identity is who the serving certificate must name: the host names and
// addresses the API server dials.
type identity struct {
	DNSNames []string
	IPs      []net.IP
}

// material is what the certificate Secret holds, parsed.
type material struct {
	ca       *certs.KeyPair
	previous []*x509.Certificate // older authorities still trusted
	serving  *certs.KeyPair
}

// parseMaterial reads the Secret's data; whatever is missing or broken is
// left nil, to be issued again.
func parseMaterial(data map[string][]byte) material {
	var m material
	bundle := parseCerts(data[caBundleKey])
	if len(bundle) > 0 {
		if key, err := certs.ParseKey(data[caKeyKey]); err == nil {
			m.ca = &certs.KeyPair{Cert: bundle[0], Key: key}
			m.previous = bundle[1:]
		}
	}
	if kp, err := certs.Parse(data[tlsCertKey], data[tlsKeyKey]); err == nil {
		m.serving = kp
	}
	return m
}

func parseCerts(b []byte) []*x509.Certificate {
	var out []*x509.Certificate
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			return out
		}
		if c, err := x509.ParseCertificate(block.Bytes); err == nil {
			out = append(out, c)
		}
	}
}

// renewal is what must be issued anew.
type renewal struct{ ca, serving bool }

func (r renewal) any() bool { return r.ca || r.serving }

// authorityHandoff is how long a new authority is in the caBundle before
// the server serves a certificate it signed: the API server trusts it only
// once it has seen the configurations' new caBundle.
const authorityHandoff = 10 * time.Second

// plan decides, for the stored material at now, what to issue, and when to
// look again (the earliest moment one of the certificates enters its renewal
// window, or a new authority's handoff ends).
func (l Lifetimes) plan(m material, id identity, now time.Time) (renewal, time.Time) {
	var r renewal
	if m.ca == nil || !m.ca.ValidFor(now, l.CARenewBefore) {
		r.ca = true
	}
	var handoffEnd time.Time
	switch {
	case m.serving == nil || !now.Before(m.serving.Cert.NotAfter) || !m.trusts(m.serving.Cert, now, r.ca) || !names(m.serving.Cert, id):
		// What is stored cannot be served at all.
		r.serving = true
	case r.ca:
		// A new authority does not replace the serving certificate at
		// once: the previous authority stays in the bundle, and the
		// serving certificate moves to the new one after the handoff.
	case !m.serving.ValidFor(now, l.ServingRenewBefore) && m.serving.Cert.NotAfter.Before(m.ca.Cert.NotAfter):
		// (A certificate that ends with its authority would be issued
		// again with the same end: the authority's renewal comes first.)
		handoffEnd = m.ca.Cert.NotAfter.Add(-l.CA).Add(authorityHandoff)
		if m.serving.Cert.CheckSignatureFrom(m.ca.Cert) == nil || !now.Before(handoffEnd) {
			r.serving, handoffEnd = true, time.Time{}
		}
	}
	if r.any() {
		return r, now
	}
	next := m.ca.Cert.NotAfter.Add(-l.CARenewBefore)
	if t := m.serving.Cert.NotAfter.Add(-l.ServingRenewBefore); t.After(now) && t.Before(next) {
		next = t
	}
	if !handoffEnd.IsZero() && handoffEnd.Before(next) {
		next = handoffEnd
	}
	return r, next
}

// trusts tells whether cert is signed by an authority of the bundle: the
// current one (unless it is being replaced, then it becomes the previous
// one) or a previous one that has not expired.
func (m material) trusts(cert *x509.Certificate, now time.Time, caRenewed bool) bool {
	if m.ca == nil {
		return false
	}
	authorities := append([]*x509.Certificate{m.ca.Cert}, m.previous...)
	for i, ca := range authorities {
		if i > 0 && caRenewed {
			// Only the authority being replaced stays in the new bundle.
			break
		}
		if now.Before(ca.NotAfter) && cert.CheckSignatureFrom(ca) == nil {
			return true
		}
	}
	return false
}

// names tells whether cert names every host and address of id.
func names(cert *x509.Certificate, id identity) bool {
	for _, d := range id.DNSNames {
		if cert.VerifyHostname(d) != nil {
			return false
		}
	}
	for _, ip := range id.IPs {
		if cert.VerifyHostname(ip.String()) != nil {
			return false
		}
	}
	return true
}

// renew issues what r asks for and returns the Secret data to store.
func (l Lifetimes) renew(m material, r renewal, id identity, now time.Time) (material, map[string][]byte, error) {
	if r.ca {
		ca, err := certs.NewCA("capstan-webhook-ca", "", now, l.CA)
		if err != nil {
			return m, nil, fmt.Errorf("issuing the webhook certificate authority: %w", err)
		}
		var previous []*x509.Certificate
		if m.ca != nil && now.Before(m.ca.Cert.NotAfter) {
			previous = append(previous, m.ca.Cert)
		}
		m.ca, m.previous = ca, previous
	}
	if r.serving {
		kp, err := m.ca.Issue(certs.Request{CommonName: "capstan-webhook", DNSNames: id.DNSNames, IPs: id.IPs, Server: true, Lifetime: l.Serving}, now)
		if err != nil {
			return m, nil, fmt.Errorf("issuing the webhook serving certificate: %w", err)
		}
		m.serving = kp
	}
	data, err := m.data(now)
	return m, data, err
}

// data is the Secret data of m, with expired previous authorities dropped.
func (m material) data(now time.Time) (map[string][]byte, error) {
	caKey, err := m.ca.KeyPEM()
	if err != nil {
		return nil, err
	}
	tlsKey, err := m.serving.KeyPEM()
	if err != nil {
		return nil, err
	}
	return map[string][]byte{
		caBundleKey: m.bundle(now),
		caKeyKey:    caKey,
		tlsCertKey:  m.serving.CertPEM(),
		tlsKeyKey:   tlsKey,
	}, nil
}

// bundle is the caBundle the API server trusts: the current authority and
// the previous ones that have not expired.
func (m material) bundle(now time.Time) []byte {
	var buf bytes.Buffer
	buf.Write(m.ca.CertPEM())
	for _, c := range m.previous {
		if now.Before(c.NotAfter) {
			buf.Write(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw}))
		}
	}
	return buf.Bytes()
}
