package kubeadm

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	kubeadmv1beta3 "k8s.io/kubernetes/cmd/kubeadm/app/apis/kubeadm/v1beta3"
	kubeadmv1beta4 "k8s.io/kubernetes/cmd/kubeadm/app/apis/kubeadm/v1beta4"

	bootstrapv1 "capstan.dev/capstan/api/bootstrap/kubeadm/v1beta2"
	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

func TestAPIVersionFor(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		err      bool
	}{
		{"v1.31.0", APIVersionV1Beta4, false},
		{"v1.34.2", APIVersionV1Beta4, false},
		{"1.35.0", APIVersionV1Beta4, false},
		{"v1.31.0-rc.1", APIVersionV1Beta4, false},
		{"v1.30.9", APIVersionV1Beta3, false},
		{"v1.28.0", APIVersionV1Beta3, false},
		{"", "", true},
		{"latest", "", true},
	} {
		got, err := APIVersionFor(tc.in)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("APIVersionFor(%q) = %q, %v; want %q, error %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func splitDocs(t *testing.T, b []byte) []string {
	t.Helper()
	docs := strings.Split(string(b), "---\n")
	if len(docs) != 2 {
		t.Fatalf("want 2 documents, have %d:\n%s", len(docs), b)
	}
	return docs
}

var network = &clusterv1.ClusterNetwork{
	Services:      clusterv1.NetworkRanges{CIDRBlocks: []string{"10.96.0.0/12"}},
	Pods:          clusterv1.NetworkRanges{CIDRBlocks: []string{"192.168.0.0/16", "fd00::/56"}},
	ServiceDomain: "cluster.local",
}

func fullCluster() bootstrapv1.ClusterConfiguration {
	return bootstrapv1.ClusterConfiguration{
		APIServer: bootstrapv1.APIServer{
			ExtraArgs: []bootstrapv1.Arg{{Name: "audit-log-maxage", Value: ptr.To("30")}, {Name: "enable-admission-plugins", Value: ptr.To("NodeRestriction")}},
			ExtraEnvs: &[]bootstrapv1.EnvVar{{EnvVar: corev1.EnvVar{Name: "HTTP_PROXY", Value: "http://proxy"}}},
			CertSANs:  []string{"api.example.com"},
		},
		Etcd:                          bootstrapv1.Etcd{Local: bootstrapv1.LocalEtcd{DataDir: "/var/lib/etcd2", ExtraArgs: []bootstrapv1.Arg{{Name: "quota-backend-bytes", Value: ptr.To("8589934592")}}}},
		CertificateValidityPeriodDays: 30,
		EncryptionAlgorithm:           bootstrapv1.EncryptionAlgorithmECDSAP256,
	}
}

func fullInit() bootstrapv1.InitConfiguration {
	return bootstrapv1.InitConfiguration{
		NodeRegistration: bootstrapv1.NodeRegistrationOptions{
			Name:             "{{ ds.meta_data.local_hostname }}",
			KubeletExtraArgs: []bootstrapv1.Arg{{Name: "eviction-hard", Value: ptr.To("nodefs.available<0%")}},
			Taints:           &[]corev1.Taint{},
		},
		Timeouts: bootstrapv1.Timeouts{ControlPlaneComponentHealthCheckSeconds: ptr.To[int32](120)},
		BootstrapTokens: []bootstrapv1.BootstrapToken{{
			Token: bootstrapv1.BootstrapTokenString{ID: "abcdef", Secret: "0123456789abcdef"}, TTLSeconds: ptr.To[int32](600),
		}},
	}
}

func TestRenderInitV1Beta4(t *testing.T) {
	out, err := RenderInit(fullCluster(), fullInit(), "v1.34.2", "c1", "127.0.0.1:40123", network)
	if err != nil {
		t.Fatal(err)
	}
	docs := splitDocs(t, out)
	var cc kubeadmv1beta4.ClusterConfiguration
	if err := yaml.UnmarshalStrict([]byte(docs[0]), &cc); err != nil {
		t.Fatalf("ClusterConfiguration does not read back: %v\n%s", err, docs[0])
	}
	if cc.APIVersion != APIVersionV1Beta4 || cc.Kind != "ClusterConfiguration" {
		t.Errorf("type: %s %s", cc.APIVersion, cc.Kind)
	}
	if cc.KubernetesVersion != "v1.34.2" || cc.ClusterName != "c1" || cc.ControlPlaneEndpoint != "127.0.0.1:40123" {
		t.Errorf("filled fields: version %q name %q endpoint %q", cc.KubernetesVersion, cc.ClusterName, cc.ControlPlaneEndpoint)
	}
	if cc.Networking.PodSubnet != "192.168.0.0/16,fd00::/56" || cc.Networking.ServiceSubnet != "10.96.0.0/12" || cc.Networking.DNSDomain != "cluster.local" {
		t.Errorf("networking: %+v", cc.Networking)
	}
	if len(cc.APIServer.ExtraArgs) != 2 || cc.APIServer.ExtraArgs[0] != (kubeadmv1beta4.Arg{Name: "audit-log-maxage", Value: "30"}) {
		t.Errorf("apiServer extraArgs as a list in order: %+v", cc.APIServer.ExtraArgs)
	}
	if len(cc.APIServer.ExtraEnvs) != 1 || cc.APIServer.ExtraEnvs[0].Name != "HTTP_PROXY" {
		t.Errorf("extraEnvs: %+v", cc.APIServer.ExtraEnvs)
	}
	if cc.Etcd.Local == nil || cc.Etcd.Local.DataDir != "/var/lib/etcd2" || cc.Etcd.External != nil {
		t.Errorf("etcd: %+v", cc.Etcd)
	}
	if cc.CertificateValidityPeriod == nil || cc.CertificateValidityPeriod.Duration != 30*24*time.Hour || cc.CACertificateValidityPeriod != nil {
		t.Errorf("validity periods: %v %v", cc.CertificateValidityPeriod, cc.CACertificateValidityPeriod)
	}
	if cc.EncryptionAlgorithm != kubeadmv1beta4.EncryptionAlgorithmECDSAP256 {
		t.Errorf("encryptionAlgorithm %q", cc.EncryptionAlgorithm)
	}

	var ic kubeadmv1beta4.InitConfiguration
	if err := yaml.UnmarshalStrict([]byte(docs[1]), &ic); err != nil {
		t.Fatalf("InitConfiguration does not read back: %v\n%s", err, docs[1])
	}
	if ic.APIVersion != APIVersionV1Beta4 || ic.Kind != "InitConfiguration" {
		t.Errorf("type: %s %s", ic.APIVersion, ic.Kind)
	}
	if ic.NodeRegistration.Name != "{{ ds.meta_data.local_hostname }}" {
		t.Errorf("node name %q", ic.NodeRegistration.Name)
	}
	if ic.NodeRegistration.Taints == nil || len(ic.NodeRegistration.Taints) != 0 {
		t.Errorf("an empty taint list must stay an empty list (no taint), have %#v", ic.NodeRegistration.Taints)
	}
	if !strings.Contains(docs[1], "taints: []") {
		t.Errorf("want literal `taints: []`:\n%s", docs[1])
	}
	if ic.Timeouts == nil || ic.Timeouts.ControlPlaneComponentHealthCheck.Duration != 2*time.Minute || ic.Timeouts.Discovery != nil {
		t.Errorf("timeouts %+v", ic.Timeouts)
	}
	if len(ic.BootstrapTokens) != 1 || ic.BootstrapTokens[0].Token.String() != "abcdef.0123456789abcdef" || ic.BootstrapTokens[0].TTL.Duration != 10*time.Minute {
		t.Errorf("bootstrapTokens %+v", ic.BootstrapTokens)
	}
	if !strings.Contains(docs[1], "token: abcdef.0123456789abcdef") {
		t.Errorf("token must be one string:\n%s", docs[1])
	}
}

func TestRenderInitV1Beta3(t *testing.T) {
	out, err := RenderInit(fullCluster(), fullInit(), "v1.30.4", "c1", "127.0.0.1:40123", nil)
	if err != nil {
		t.Fatal(err)
	}
	docs := splitDocs(t, out)
	var cc kubeadmv1beta3.ClusterConfiguration
	if err := yaml.UnmarshalStrict([]byte(docs[0]), &cc); err != nil {
		t.Fatalf("ClusterConfiguration does not read back as v1beta3: %v\n%s", err, docs[0])
	}
	if cc.APIVersion != APIVersionV1Beta3 {
		t.Errorf("apiVersion %s", cc.APIVersion)
	}
	if cc.APIServer.ExtraArgs["audit-log-maxage"] != "30" || len(cc.APIServer.ExtraArgs) != 2 {
		t.Errorf("extraArgs as a map: %+v", cc.APIServer.ExtraArgs)
	}
	if cc.Etcd.Local == nil || cc.Etcd.Local.ExtraArgs["quota-backend-bytes"] != "8589934592" {
		t.Errorf("etcd extraArgs: %+v", cc.Etcd.Local)
	}
	if cc.APIServer.TimeoutForControlPlane == nil || cc.APIServer.TimeoutForControlPlane.Duration != 2*time.Minute {
		t.Errorf("timeoutForControlPlane %v", cc.APIServer.TimeoutForControlPlane)
	}
	if cc.Networking != (kubeadmv1beta3.Networking{}) {
		t.Errorf("no network given, have %+v", cc.Networking)
	}
	for _, v1beta4Only := range []string{"extraEnvs", "encryptionAlgorithm", "certificateValidityPeriod"} {
		if strings.Contains(docs[0], v1beta4Only) {
			t.Errorf("v1beta3 has no %s:\n%s", v1beta4Only, docs[0])
		}
	}
	var ic kubeadmv1beta3.InitConfiguration
	if err := yaml.UnmarshalStrict([]byte(docs[1]), &ic); err != nil {
		t.Fatalf("InitConfiguration does not read back as v1beta3: %v\n%s", err, docs[1])
	}
	if ic.NodeRegistration.KubeletExtraArgs["eviction-hard"] != "nodefs.available<0%" {
		t.Errorf("kubeletExtraArgs %+v", ic.NodeRegistration.KubeletExtraArgs)
	}
}

func TestRenderInitKeepsUserEndpointAndNilTaints(t *testing.T) {
	out, err := RenderInit(bootstrapv1.ClusterConfiguration{ControlPlaneEndpoint: "lb.example.com:443"}, bootstrapv1.InitConfiguration{}, "v1.33.0", "c1", "127.0.0.1:1", nil)
	if err != nil {
		t.Fatal(err)
	}
	docs := splitDocs(t, out)
	if !strings.Contains(docs[0], "controlPlaneEndpoint: lb.example.com:443") {
		t.Errorf("user endpoint must win:\n%s", docs[0])
	}
	// No list means kubeadm's default control-plane taint.
	if !strings.Contains(docs[1], "taints: null") {
		t.Errorf("unset taints must stay unset:\n%s", docs[1])
	}
	if strings.Contains(docs[0], "etcd:\n  local") || strings.Contains(docs[1], "timeouts") {
		t.Errorf("nothing set must render nothing:\n%s", out)
	}
}

func TestRenderJoin(t *testing.T) {
	join := bootstrapv1.JoinConfiguration{
		NodeRegistration: bootstrapv1.NodeRegistrationOptions{
			Name:             "{{ ds.meta_data.local_hostname }}",
			KubeletExtraArgs: []bootstrapv1.Arg{{Name: "node-labels", Value: ptr.To("a=b")}},
		},
		Discovery: bootstrapv1.Discovery{BootstrapToken: bootstrapv1.BootstrapTokenDiscovery{
			Token: "abcdef.0123456789abcdef", APIServerEndpoint: "127.0.0.1:40123", CACertHashes: []string{"sha256:00ff"},
		}},
		ControlPlane: &bootstrapv1.JoinControlPlane{},
		Timeouts:     bootstrapv1.Timeouts{DiscoverySeconds: ptr.To[int32](60), TLSBootstrapSeconds: ptr.To[int32](30)},
	}
	for _, tc := range []struct {
		version, apiVersion string
		check               func(t *testing.T, doc []byte)
	}{
		{"v1.34.0", APIVersionV1Beta4, func(t *testing.T, doc []byte) {
			var jc kubeadmv1beta4.JoinConfiguration
			if err := yaml.UnmarshalStrict(doc, &jc); err != nil {
				t.Fatal(err)
			}
			bt := jc.Discovery.BootstrapToken
			if bt == nil || bt.Token != "abcdef.0123456789abcdef" || bt.APIServerEndpoint != "127.0.0.1:40123" || len(bt.CACertHashes) != 1 {
				t.Errorf("discovery %+v", bt)
			}
			if jc.ControlPlane == nil {
				t.Error("an empty controlPlane must still make a control-plane join")
			}
			if jc.Timeouts == nil || jc.Timeouts.Discovery.Duration != time.Minute || jc.Timeouts.TLSBootstrap.Duration != 30*time.Second {
				t.Errorf("timeouts %+v", jc.Timeouts)
			}
			if len(jc.NodeRegistration.KubeletExtraArgs) != 1 || jc.NodeRegistration.KubeletExtraArgs[0].Value != "a=b" {
				t.Errorf("kubeletExtraArgs %+v", jc.NodeRegistration.KubeletExtraArgs)
			}
		}},
		{"v1.29.1", APIVersionV1Beta3, func(t *testing.T, doc []byte) {
			var jc kubeadmv1beta3.JoinConfiguration
			if err := yaml.UnmarshalStrict(doc, &jc); err != nil {
				t.Fatal(err)
			}
			if jc.Discovery.Timeout == nil || jc.Discovery.Timeout.Duration != time.Minute {
				t.Errorf("discovery timeout %v", jc.Discovery.Timeout)
			}
			if jc.NodeRegistration.KubeletExtraArgs["node-labels"] != "a=b" || jc.ControlPlane == nil {
				t.Errorf("join %+v", jc)
			}
		}},
	} {
		t.Run(tc.version, func(t *testing.T) {
			out, err := RenderJoin(join, tc.version)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(string(out), "apiVersion: "+tc.apiVersion+"\n") || !strings.Contains(string(out), "kind: JoinConfiguration\n") {
				t.Errorf("header:\n%s", out)
			}
			tc.check(t, out)
		})
	}
	if _, err := RenderJoin(join, "not-a-version"); err == nil || !strings.Contains(err.Error(), "not-a-version") {
		t.Errorf("a bad version must be named in the error, have %v", err)
	}
}

func TestJoinEndpoint(t *testing.T) {
	if got := JoinEndpoint(clusterv1.APIEndpoint{Host: "127.0.0.1", Port: 6443}); got != "127.0.0.1:6443" {
		t.Error(got)
	}
	if got := JoinEndpoint(clusterv1.APIEndpoint{Host: "::1", Port: 6443}); got != "[::1]:6443" {
		t.Error(got)
	}
}

// What RenderInit and RenderJoin write, the node's Parse reads back
// without a warning, in both API versions.
func TestRenderedFilesParse(t *testing.T) {
	join := bootstrapv1.JoinConfiguration{Discovery: bootstrapv1.Discovery{BootstrapToken: bootstrapv1.BootstrapTokenDiscovery{
		Token: "abcdef.0123456789abcdef", APIServerEndpoint: "127.0.0.1:1", CACertHashes: []string{"sha256:00"},
	}}, ControlPlane: &bootstrapv1.JoinControlPlane{}}
	for _, v := range []string{"v1.34.2", "v1.30.0"} {
		out, err := RenderInit(fullCluster(), fullInit(), v, "c1", "127.0.0.1:40123", network)
		if err != nil {
			t.Fatal(err)
		}
		docs, err := Parse(out)
		if err != nil {
			t.Fatalf("%s init: %v", v, err)
		}
		if docs.Cluster == nil || docs.Init == nil || len(docs.Warnings) > 0 || len(docs.Ignored) > 0 {
			t.Errorf("%s init: %+v", v, docs)
		}
		if docs.Cluster.ClusterName != "c1" || docs.Cluster.Networking.PodSubnet != "192.168.0.0/16,fd00::/56" {
			t.Errorf("%s init: cluster %+v", v, docs.Cluster)
		}
		out, err = RenderJoin(join, v)
		if err != nil {
			t.Fatal(err)
		}
		docs, err = Parse(out)
		if err != nil {
			t.Fatalf("%s join: %v", v, err)
		}
		if docs.Join == nil || len(docs.Warnings) > 0 || docs.Join.Discovery.BootstrapToken == nil || docs.Join.ControlPlane == nil {
			t.Errorf("%s join: %+v", v, docs)
		}
	}
}
