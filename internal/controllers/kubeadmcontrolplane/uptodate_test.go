package kubeadmcontrolplane

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	controlplanev1 "capstan.dev/capstan/api/controlplane/kubeadm/v1beta2"
	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/certs"
)

func TestOutdated(t *testing.T) {
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	kcp := &controlplanev1.KubeadmControlPlane{Spec: controlplanev1.KubeadmControlPlaneSpec{Version: "v1.35.8"}}
	kcp.Spec.MachineTemplate.Spec.InfrastructureRef = clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "LocalMachineTemplate", Name: "cp"}
	machine := func(version, expiry string, created time.Time) *machineState {
		m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "m", CreationTimestamp: metav1.NewTime(created), Annotations: map[string]string{}}}
		m.Spec.Version = version
		if expiry != "" {
			m.Annotations[clusterv1.MachineCertificatesExpiryDateAnnotation] = expiry
		}
		return &machineState{machine: m}
	}
	for _, tc := range []struct {
		name   string
		mutate func(*controlplanev1.KubeadmControlPlane)
		m      *machineState
		want   string
	}{
		{name: "matches", m: machine("v1.35.8", "", now), want: ""},
		{name: "version", m: machine("v1.35.7", "", now), want: "version v1.35.7, want v1.35.8"},
		{name: "certificates inside the window", mutate: func(k *controlplanev1.KubeadmControlPlane) { k.Spec.Rollout.Before.CertificatesExpiryDays = 30 },
			m: machine("v1.35.8", now.Add(10*24*time.Hour).Format(time.RFC3339), now), want: "certificates expire on"},
		{name: "certificates outside the window", mutate: func(k *controlplanev1.KubeadmControlPlane) { k.Spec.Rollout.Before.CertificatesExpiryDays = 5 },
			m: machine("v1.35.8", now.Add(10*24*time.Hour).Format(time.RFC3339), now), want: ""},
		{name: "rollout.after passed", mutate: func(k *controlplanev1.KubeadmControlPlane) {
			k.Spec.Rollout.After = metav1.NewTime(now.Add(-time.Hour))
		},
			m: machine("v1.35.8", "", now.Add(-2*time.Hour)), want: "spec.rollout.after"},
		{name: "machine newer than rollout.after", mutate: func(k *controlplanev1.KubeadmControlPlane) {
			k.Spec.Rollout.After = metav1.NewTime(now.Add(-time.Hour))
		},
			m: machine("v1.35.8", "", now.Add(-time.Minute)), want: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := kcp.DeepCopy()
			if tc.mutate != nil {
				tc.mutate(k)
			}
			got := strings.Join((&Reconciler{}).outdated(&scope{kcp: k, now: now}, tc.m), "; ")
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("outdated = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestServingCertificateExpiry(t *testing.T) {
	now := time.Now()
	ca, err := certs.NewCA("cluster-ca", certs.DefaultKeyAlgorithm, now, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.Issue(certs.Request{CommonName: "kube-apiserver", IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, Server: true, Lifetime: 3 * time.Hour}, now)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.NotFoundHandler())
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{leaf.Cert.Raw}, PrivateKey: leaf.Key}}}
	srv.StartTLS()
	defer srv.Close()
	// The controller reaches the server through a port-forward; what it
	// reads from the connection is tested here over a plain one.
	dial := func() net.Conn {
		conn, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		return conn
	}
	got, err := certificateExpiry(context.Background(), dial(), ca)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Equal(leaf.Cert.NotAfter) {
		t.Errorf("expiry %s, want %s", got, leaf.Cert.NotAfter)
	}
	other, _ := certs.NewCA("other", certs.DefaultKeyAlgorithm, now, time.Hour)
	if _, err := certificateExpiry(context.Background(), dial(), other); err == nil {
		t.Error("a certificate from another CA was believed")
	}
}

func TestRemediationRetry(t *testing.T) {
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	kcp := &controlplanev1.KubeadmControlPlane{}
	kcp.Spec.Remediation.MinHealthyPeriodSeconds = ptrInt32(600)
	machine := func(created time.Time, annotation string) *clusterv1.Machine {
		m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "m", CreationTimestamp: metav1.NewTime(created), Annotations: map[string]string{}}}
		if annotation != "" {
			m.Annotations[controlplanev1.RemediationForAnnotation] = annotation
		}
		return m
	}
	record := `{"machine":"old","timestamp":"2026-06-01T11:50:00Z","retryCount":2}`
	for _, tc := range []struct {
		name string
		m    *clusterv1.Machine
		want int
	}{
		{name: "not a replacement", m: machine(now.Add(-time.Minute), ""), want: 0},
		{name: "replacement failing within the healthy period continues the count", m: machine(now.Add(-5*time.Minute), record), want: 3},
		{name: "replacement that was healthy long enough starts over", m: machine(now.Add(-11*time.Minute), record), want: 0},
		{name: "unreadable record starts over", m: machine(now.Add(-time.Minute), "{"), want: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := remediationRetry(&scope{kcp: kcp, now: now}, tc.m); got != tc.want {
				t.Errorf("remediationRetry = %d, want %d", got, tc.want)
			}
		})
	}
}

func ptrInt32(v int32) *int32 { return &v }
