package webhook

import (
	"net"
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
		{name: "authority in its renewal window renews both", m: m, id: loopback, now: start.Add(85 * time.Hour), want: renewal{ca: true, serving: true}, wantNext: start.Add(85 * time.Hour)},
		{name: "serving certificate of another authority", m: material{ca: other.ca, serving: m.serving}, id: loopback, now: start.Add(time.Hour), want: renewal{serving: true}, wantNext: start.Add(time.Hour)},
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
	later := start.Add(85 * time.Hour)
	m2, data, err := l.renew(parseMaterial(data), renewal{ca: true, serving: true}, id, later)
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
