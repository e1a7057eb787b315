package webhook

import (
	"net"
	"strings"
	"testing"
)

func TestEndpointsAndConfigurations(t *testing.T) {
	// Deployed into the cluster: a Service, and a certificate for its names.
	s := &Server{opts: Options{Service: "capstan-webhook-service", Namespace: "capstan-system"}}
	if err := s.setEndpoint(&net.TCPAddr{IP: net.IPv4zero, Port: 9443}); err != nil {
		t.Fatal(err)
	}
	if !contains(s.id.DNSNames, "capstan-webhook-service.capstan-system.svc") {
		t.Errorf("certificate names %v lack the Service's DNS name", s.id.DNSNames)
	}
	v, m := configurations(s.endpoint, []byte("bundle"))
	for _, w := range v.Webhooks {
		cc := w.ClientConfig
		if cc.URL != nil || cc.Service == nil || cc.Service.Name != "capstan-webhook-service" || cc.Service.Namespace != "capstan-system" ||
			*cc.Service.Port != 443 || cc.Service.Path == nil || string(cc.CABundle) != "bundle" {
			t.Errorf("webhook %s: client config %+v, want the Service on 443 with a path and the bundle", w.Name, cc)
		}
	}
	if svc := m.Webhooks[0].ClientConfig.Service; svc == nil || *svc.Path != ClusterDefaultPath {
		t.Errorf("mutating webhook client config %+v, want the Service and %s", m.Webhooks[0].ClientConfig, ClusterDefaultPath)
	}

	// Beside the API server: a URL on loopback with the port bound.
	s = &Server{opts: Options{Namespace: "capstan-system"}}
	if err := s.setEndpoint(&net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 41027}); err != nil {
		t.Fatal(err)
	}
	v, _ = configurations(s.endpoint, nil)
	if got := *v.Webhooks[0].ClientConfig.URL; got != "https://127.0.0.1:41027"+ClusterValidatePath {
		t.Errorf("URL = %s", got)
	}
	if len(s.id.IPs) != 1 || !s.id.IPs[0].Equal(net.ParseIP("127.0.0.1")) {
		t.Errorf("certificate addresses %v, want 127.0.0.1", s.id.IPs)
	}

	// Another interface without a Service cannot be reached that way.
	err := (&Server{opts: Options{Namespace: "x"}}).setEndpoint(&net.TCPAddr{IP: net.ParseIP("10.1.2.3"), Port: 9443})
	if err == nil || !strings.Contains(err.Error(), "bind to 127.0.0.1") {
		t.Errorf("binding 10.1.2.3 without a Service: %v, want an error saying to bind to 127.0.0.1", err)
	}
}
