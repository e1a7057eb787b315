package kubeadm

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

const v1beta4Init = `apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
clusterName: c1
controlPlaneEndpoint: 127.0.0.1:40123
kubernetesVersion: v1.34.2
networking:
  podSubnet: 192.168.0.0/16
  serviceSubnet: 10.128.0.0/12
apiServer:
  certSANs: [localhost, 127.0.0.1]
  extraArgs:
  - name: enable-admission-plugins
    value: NodeRestriction
controllerManager:
  extraArgs:
  - name: bind-address
    value: 0.0.0.0
---
apiVersion: kubeadm.k8s.io/v1beta4
kind: InitConfiguration
localAPIEndpoint: {}
nodeRegistration:
  name: '{{ ds.meta_data.local_hostname }}'
  kubeletExtraArgs:
  - name: node-labels
    value: tier=cp
  taints: []
`

const v1beta3Init = `---
apiVersion: kubeadm.k8s.io/v1beta3
kind: ClusterConfiguration
clusterName: old
controlPlaneEndpoint: 127.0.0.1:40200
apiServer:
  extraArgs:
    audit-log-maxage: "30"
---
apiVersion: kubeadm.k8s.io/v1beta3
kind: InitConfiguration
nodeRegistration:
  criSocket: unix:///var/run/containerd/containerd.sock
  kubeletExtraArgs:
    eviction-hard: nodefs.available<0%
---
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: systemd
`

const v1beta4Join = `apiVersion: kubeadm.k8s.io/v1beta4
kind: JoinConfiguration
discovery:
  bootstrapToken:
    apiServerEndpoint: 127.0.0.1:40123
    token: abcdef.0123456789abcdef
    caCertHashes:
    - sha256:0a1b
nodeRegistration:
  name: w1
  taints:
  - key: dedicated
    value: gpu
    effect: NoSchedule
`

const v1beta3JoinCP = `# written by the bootstrap provider
apiVersion: kubeadm.k8s.io/v1beta3
kind: JoinConfiguration
controlPlane:
  localAPIEndpoint:
    advertiseAddress: 127.0.0.1
discovery:
  bootstrapToken:
    apiServerEndpoint: 127.0.0.1:40123
    token: abcdef.0123456789abcdef
    unsafeSkipCAVerification: true
  tlsBootstrapToken: ghijkl.0123456789abcdef
`

func TestParse(t *testing.T) {
	cases := []struct {
		name  string
		data  string
		check func(t *testing.T, d Documents)
	}{
		{"v1beta4 init", v1beta4Init, func(t *testing.T, d Documents) {
			if d.Cluster == nil || d.Init == nil || d.Join != nil {
				t.Fatalf("kinds: cluster %v init %v join %v", d.Cluster != nil, d.Init != nil, d.Join != nil)
			}
			if d.Init.ClusterConfiguration.ClusterName != "c1" || d.Cluster.ControlPlaneEndpoint != "127.0.0.1:40123" {
				t.Errorf("cluster configuration not carried: %+v", d.Init.ClusterConfiguration)
			}
			if got := ArgsMap(d.Cluster.APIServer.ExtraArgs)["enable-admission-plugins"]; got != "NodeRestriction" {
				t.Errorf("apiServer extra arg = %q", got)
			}
			if d.Cluster.Networking.PodSubnet != "192.168.0.0/16" || d.Cluster.Networking.DNSDomain != "cluster.local" {
				t.Errorf("networking (with defaults) = %+v", d.Cluster.Networking)
			}
			if d.Init.NodeRegistration.Taints == nil || len(d.Init.NodeRegistration.Taints) != 0 {
				t.Errorf("taints: [] must stay an empty, non-nil list (no default taint), got %#v", d.Init.NodeRegistration.Taints)
			}
			if ArgsMap(d.Init.NodeRegistration.KubeletExtraArgs)["node-labels"] != "tier=cp" {
				t.Errorf("kubelet extra args = %v", d.Init.NodeRegistration.KubeletExtraArgs)
			}
			if len(d.Ignored) != 0 || len(d.Warnings) != 0 {
				t.Errorf("ignored %v warnings %v", d.Ignored, d.Warnings)
			}
		}},
		{"v1beta3 init with kubelet configuration", v1beta3Init, func(t *testing.T, d Documents) {
			if d.Cluster == nil || d.Init == nil {
				t.Fatal("missing kinds")
			}
			if got := ArgsMap(d.Cluster.APIServer.ExtraArgs)["audit-log-maxage"]; got != "30" {
				t.Errorf("v1beta3 map extraArgs not converted: %v", d.Cluster.APIServer.ExtraArgs)
			}
			if d.Init.NodeRegistration.Taints != nil {
				t.Errorf("absent taints must stay nil (kubeadm's default applies), got %v", d.Init.NodeRegistration.Taints)
			}
			if len(d.Ignored) != 1 || !strings.Contains(d.Ignored[0], "document 3: kubelet.config.k8s.io/v1beta1/KubeletConfiguration") {
				t.Errorf("ignored = %v", d.Ignored)
			}
		}},
		{"v1beta4 worker join", v1beta4Join, func(t *testing.T, d Documents) {
			j := d.Join
			if j == nil || d.Init != nil || d.Cluster != nil {
				t.Fatal("want only a JoinConfiguration")
			}
			bt := j.Discovery.BootstrapToken
			if bt == nil || bt.APIServerEndpoint != "127.0.0.1:40123" || bt.Token != "abcdef.0123456789abcdef" || len(bt.CACertHashes) != 1 {
				t.Fatalf("discovery = %+v", bt)
			}
			if j.Discovery.TLSBootstrapToken != bt.Token {
				t.Errorf("tlsBootstrapToken not defaulted from the discovery token: %q", j.Discovery.TLSBootstrapToken)
			}
			if j.ControlPlane != nil {
				t.Error("worker join has controlPlane")
			}
			want := corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}
			if len(j.NodeRegistration.Taints) != 1 || j.NodeRegistration.Taints[0] != want {
				t.Errorf("taints = %v", j.NodeRegistration.Taints)
			}
		}},
		{"v1beta3 control-plane join", v1beta3JoinCP, func(t *testing.T, d Documents) {
			j := d.Join
			if j == nil || j.ControlPlane == nil {
				t.Fatal("want a control-plane JoinConfiguration")
			}
			if !j.Discovery.BootstrapToken.UnsafeSkipCAVerification || j.Discovery.TLSBootstrapToken != "ghijkl.0123456789abcdef" {
				t.Errorf("discovery = %+v tls %q", j.Discovery.BootstrapToken, j.Discovery.TLSBootstrapToken)
			}
			if j.ControlPlane.LocalAPIEndpoint.AdvertiseAddress != "127.0.0.1" {
				t.Errorf("localAPIEndpoint = %+v", j.ControlPlane.LocalAPIEndpoint)
			}
		}},
		{"init without cluster configuration", "apiVersion: kubeadm.k8s.io/v1beta4\nkind: InitConfiguration\n", func(t *testing.T, d Documents) {
			if d.Init == nil || d.Cluster != nil {
				t.Fatal("want only an InitConfiguration")
			}
			if d.Init.ClusterConfiguration.CertificatesDir != "/etc/kubernetes/pki" {
				t.Errorf("cluster configuration not defaulted: %+v", d.Init.ClusterConfiguration)
			}
		}},
		{"unknown field is a warning", "apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\nsurprise: 1\ndiscovery:\n  bootstrapToken:\n    token: abcdef.0123456789abcdef\n    apiServerEndpoint: 1.2.3.4:6443\n", func(t *testing.T, d Documents) {
			if d.Join == nil {
				t.Fatal("no join")
			}
			if len(d.Warnings) != 1 || !strings.Contains(d.Warnings[0], "surprise") || !strings.Contains(d.Warnings[0], "document 1") {
				t.Errorf("warnings = %v", d.Warnings)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, err := Parse([]byte(tc.data))
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, d)
		})
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct{ name, data, want string }{
		{"old version", "apiVersion: kubeadm.k8s.io/v1beta2\nkind: InitConfiguration\n", "document 1 (kubeadm.k8s.io/v1beta2 InitConfiguration): apiVersion kubeadm.k8s.io/v1beta2 is not supported"},
		{"no kind", "apiVersion: kubeadm.k8s.io/v1beta4\nclusterName: x\n", "document 1: apiVersion and kind are required"},
		{"wrong field type", "apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\n---\napiVersion: kubeadm.k8s.io/v1beta4\nkind: InitConfiguration\nlocalAPIEndpoint:\n  bindPort: many\n", "document 2 (kubeadm.k8s.io/v1beta4 InitConfiguration)"},
		{"duplicate kind", "apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\n---\napiVersion: kubeadm.k8s.io/v1beta3\nkind: JoinConfiguration\n", "document 2 (kubeadm.k8s.io/v1beta3 JoinConfiguration): a second JoinConfiguration"},
		{"nothing kubeadm", "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n", "no ClusterConfiguration, InitConfiguration or JoinConfiguration"},
		{"empty", "", "no ClusterConfiguration"},
		{"not a mapping", "- a\n- b\n", "document 1: not a YAML mapping"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.data))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want it to contain %q", err, tc.want)
			}
			if tc.name == "wrong field type" && !strings.Contains(err.Error(), "bindPort") {
				t.Errorf("error does not name the field: %v", err)
			}
		})
	}
}

func TestMarshalClusterConfigurationRoundTrip(t *testing.T) {
	d, err := Parse([]byte(v1beta3Init))
	if err != nil {
		t.Fatal(err)
	}
	out, err := MarshalClusterConfiguration(d.Cluster)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "apiVersion: kubeadm.k8s.io/v1beta4") || !strings.Contains(string(out), "kind: ClusterConfiguration") {
		t.Fatalf("not v1beta4 ClusterConfiguration:\n%s", out)
	}
	again, err := Parse(out)
	if err != nil {
		t.Fatal(err)
	}
	if again.Cluster.ClusterName != "old" || ArgsMap(again.Cluster.APIServer.ExtraArgs)["audit-log-maxage"] != "30" {
		t.Errorf("round trip lost fields:\n%s", out)
	}
}
