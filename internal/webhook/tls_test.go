package webhook

import (
	"crypto/x509"
	"net"
	"strings"
	"testing"
	"time"
)

func TestLifetimesPlan(t *testing.T) {
	l := Lifetimes{CA: 100 * time.Hour, CARenewBefore: 20 * time.Hour, Serving: 10 * time.Hour, ServingRenewBefore: 2 * time.Hour}
	loopback := identity{IPs: []net.IP{net.ParseIP("127.0.0.1")}}
	service := identity{DNSNames: []string{"svc.ns.svc"}}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

	fresh := func(t *testing.T, id identity) material {
		t.Helper()
		m, _, err := l.renew(material{}, renewal{ca: true, serving: true}, id, start)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	m := fresh(t, loopback)
	other := fresh(t, loopback)
	// m late in its authority's life, with a serving certificate an hour old.
	late, _, err := l.renew(m, renewal{serving: true}, loopback, start.Add(84*time.Hour))
	if err != nil {
		t.Fatal(err)
	}

	// A new authority issued at 93h, while the serving certificate (of the
	// previous authority) is in its renewal window, which began at 92h.
	handoff, _, err := l.renew(late, renewal{ca: true}, loopback, start.Add(93*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	handoffEnd := start.Add(93*time.Hour + authorityHandoff)

	for _, tc := range []struct {
		name     string
		m        material
		id       identity
		now      time.Time
		want     renewal
		wantNext time.Time
	}{
		{name: "nothing stored: everything is issued", m: material{}, id: loopback, now: start, want: renewal{ca: true, serving: true}, wantNext: start},
		{name: "fresh: next look when the serving certificate enters its window", m: m, id: loopback, now: start.Add(time.Hour),
			wantNext: m.serving.Cert.NotAfter.Add(-2 * time.Hour)},
		{name: "serving certificate in its renewal window", m: m, id: loopback, now: start.Add(9 * time.Hour), want: renewal{serving: true}, wantNext: start.Add(9 * time.Hour)},
		{name: "authority in its renewal window: the serving certificate stays until the new authority is trusted",
			m: late, id: loopback, now: start.Add(85 * time.Hour), want: renewal{ca: true}, wantNext: start.Add(85 * time.Hour)},
		{name: "authority in its renewal window and serving certificate expired: both", m: m, id: loopback, now: start.Add(85 * time.Hour),
			want: renewal{ca: true, serving: true}, wantNext: start.Add(85 * time.Hour)},
		{name: "serving certificate of another authority", m: material{ca: other.ca, serving: m.serving}, id: loopback, now: start.Add(time.Hour), want: renewal{serving: true}, wantNext: start.Add(time.Hour)},
		{name: "serving certificate due during a new authority's handoff: it waits", m: handoff, id: loopback,
			now: start.Add(93*time.Hour + time.Second), wantNext: handoffEnd},
		{name: "serving certificate due after the handoff: renewed", m: handoff, id: loopback,
			now: handoffEnd.Add(time.Second), want: renewal{serving: true}, wantNext: handoffEnd.Add(time.Second)},
		{name: "serving certificate of the previous authority, still in the bundle",
			m: material{ca: other.ca, previous: []*x509.Certificate{m.ca.Cert}, serving: m.serving}, id: loopback, now: start.Add(time.Hour),
			wantNext: m.serving.Cert.NotAfter.Add(-2 * time.Hour)},
		{name: "serving certificate lacks the Service's name", m: m, id: service, now: start.Add(time.Hour), want: renewal{serving: true}, wantNext: start.Add(time.Hour)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, next := l.plan(tc.m, tc.id, tc.now)
			if got != tc.want {
				t.Errorf("renewal = %+v, want %+v", got, tc.want)
			}
			if !next.Equal(tc.wantNext) {
				t.Errorf("next look at %s, want %s", next, tc.wantNext)
			}
		})
	}
}

// A serving certificate that ends with its authority would be issued again
// with the same end: the authority's renewal comes first.
func TestServingCertificateCappedByItsAuthority(t *testing.T) {
	l := Lifetimes{CA: 10 * time.Hour, CARenewBefore: time.Hour, Serving: 20 * time.Hour, ServingRenewBefore: 2 * time.Hour}
	id := identity{IPs: []net.IP{net.ParseIP("127.0.0.1")}}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m, _, err := l.renew(material{}, renewal{ca: true, serving: true}, id, start)
	if err != nil {
		t.Fatal(err)
	}
	r, next := l.plan(m, id, start.Add(8*time.Hour+30*time.Minute))
	if r.any() || !next.Equal(m.ca.Cert.NotAfter.Add(-time.Hour)) {
		t.Fatalf("renewal %+v, next look at %s; want nothing until the authority's window at %s", r, next, m.ca.Cert.NotAfter.Add(-time.Hour))
	}
}

func TestRenewedAuthorityKeepsThePreviousInTheBundle(t *testing.T) {
	l := Lifetimes{CA: 100 * time.Hour, CARenewBefore: 20 * time.Hour, Serving: 10 * time.Hour, ServingRenewBefore: 2 * time.Hour}
	id := identity{IPs: []net.IP{net.ParseIP("127.0.0.1")}}
	start := time.Now()
	m, data, err := l.renew(material{}, renewal{ca: true, serving: true}, id, start)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(parseCerts(data[caBundleKey])); got != 1 {
		t.Fatalf("a first bundle holds %d authorities, want 1", got)
	}
	// An hour before the authority's renewal window the serving
	// certificate was renewed, as it is every eight hours.
	m, data, err = l.renew(parseMaterial(data), renewal{serving: true}, id, start.Add(79*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	later := start.Add(80*time.Hour + time.Minute)
	r, _ := l.plan(parseMaterial(data), id, later)
	if r != (renewal{ca: true}) {
		t.Fatalf("renewal in the authority's window: %+v, want the authority alone", r)
	}
	m2, data, err := l.renew(parseMaterial(data), r, id, later)
	if err != nil {
		t.Fatal(err)
	}
	if !m2.serving.Cert.Equal(m.serving.Cert) {
		t.Fatal("the serving certificate changed with the authority")
	}
	// Its own renewal comes next, from the new authority.
	r, _ = l.plan(parseMaterial(data), id, later.Add(time.Second))
	if r != (renewal{}) {
		t.Fatalf("after the authority's renewal: %+v, want nothing due", r)
	}
	m2, data, err = l.renew(parseMaterial(data), renewal{serving: true}, id, later.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	bundle := parseCerts(data[caBundleKey])
	if len(bundle) != 2 || !bundle[0].Equal(m2.ca.Cert) || !bundle[1].Equal(m.ca.Cert) {
		t.Fatalf("bundle after renewing the authority: %d certificates, want the new authority then the previous one", len(bundle))
	}
	if err := m2.serving.Cert.CheckSignatureFrom(m2.ca.Cert); err != nil {
		t.Fatalf("the new serving certificate is not signed by the new authority: %v", err)
	}
	// Once the previous authority has expired it leaves the bundle.
	if got := len(parseCerts(m2.bundle(start.Add(101 * time.Hour)))); got != 1 {
		t.Fatalf("bundle after the previous authority expired holds %d certificates, want 1", got)
	}
	// What was stored reads back as what was issued.
	back := parseMaterial(data)
	if back.ca == nil || back.serving == nil || !back.serving.Cert.Equal(m2.serving.Cert) || len(back.previous) != 1 {
		t.Fatalf("stored material does not read back: %+v", back)
	}
}

// Without a Service the API server is sent to 127.0.0.1, so an address
// that names no host, or every interface, binds loopback only; with a
// Service the address is kept as given.
func TestListenBindsLoopbackWithoutAService(t *testing.T) {
	for _, bind := range []string{":0", "0.0.0.0:0", "[::]:0"} {
		s := &Server{opts: Options{BindAddress: bind}}
		ln, err := s.listen()
		if err != nil {
			t.Fatalf("%s: %v", bind, err)
		}
		ip := ln.Addr().(*net.TCPAddr).IP
		ln.Close()
		if !ip.Equal(net.IPv4(127, 0, 0, 1)) {
			t.Errorf("--webhook-bind-address=%s without a Service listens on %s, want 127.0.0.1", bind, ip)
		}
	}
	s := &Server{opts: Options{BindAddress: ":0", Service: "capstan-webhook-service"}}
	ln, err := s.listen()
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if ip := ln.Addr().(*net.TCPAddr).IP; !ip.IsUnspecified() {
		t.Errorf("with a Service, :0 listens on %s, want every interface", ip)
	}
	if _, err := (&Server{opts: Options{BindAddress: "9443"}}).listen(); err == nil || !strings.Contains(err.Error(), "--webhook-bind-address") {
		t.Errorf("a bind address without a port: %v, want an error naming --webhook-bind-address", err)
	}
}
