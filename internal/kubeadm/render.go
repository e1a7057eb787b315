package kubeadm

import (
	"bytes"
	"fmt"
	"net"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	bootstraptokenv1 "k8s.io/kubernetes/cmd/kubeadm/app/apis/bootstraptoken/v1"
	kubeadmv1beta3 "k8s.io/kubernetes/cmd/kubeadm/app/apis/kubeadm/v1beta3"
	kubeadmv1beta4 "k8s.io/kubernetes/cmd/kubeadm/app/apis/kubeadm/v1beta4"

	bootstrapv1 "capstan.dev/capstan/api/bootstrap/kubeadm/v1beta2"
	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

// The kubeadm configuration API versions Capstan writes.
const (
	APIVersionV1Beta3 = "kubeadm.k8s.io/v1beta3"
	APIVersionV1Beta4 = "kubeadm.k8s.io/v1beta4"
)

// v1beta4Since is the first Kubernetes release whose kubeadm reads
// v1beta4; older ones only know v1beta3.
var v1beta4Since = version.MustParseGeneric("v1.31.0")

// APIVersionFor is the kubeadm configuration apiVersion the kubeadm of
// kubernetesVersion ("v1.34.2", "1.30.0") understands.
func APIVersionFor(kubernetesVersion string) (string, error) {
	v, err := version.ParseGeneric(kubernetesVersion)
	if err != nil {
		return "", fmt.Errorf("kubernetes version %q is not a version such as v1.34.2: %w", kubernetesVersion, err)
	}
	if v.AtLeast(v1beta4Since) {
		return APIVersionV1Beta4, nil
	}
	return APIVersionV1Beta3, nil
}

// RenderInit renders the file "kubeadm init --config" reads: a
// ClusterConfiguration and an InitConfiguration document separated by
// "---". What Cluster API fills from the Cluster is filled here when the
// configuration leaves it empty: the Kubernetes version, the cluster name,
// the control-plane endpoint ("host:port") and the networking from
// network, which may be nil.
func RenderInit(cluster bootstrapv1.ClusterConfiguration, init bootstrapv1.InitConfiguration, kubernetesVersion string, clusterName, endpoint string, network *clusterv1.ClusterNetwork) ([]byte, error) {
	apiVersion, err := APIVersionFor(kubernetesVersion)
	if err != nil {
		return nil, err
	}
	if cluster.ControlPlaneEndpoint == "" {
		cluster.ControlPlaneEndpoint = endpoint
	}
	var networking kubeadmv1beta4.Networking
	if network != nil {
		networking = kubeadmv1beta4.Networking{
			ServiceSubnet: network.Services.String(),
			PodSubnet:     network.Pods.String(),
			DNSDomain:     network.ServiceDomain,
		}
	}
	var docs [2]any
	if apiVersion == APIVersionV1Beta4 {
		cc := clusterV1Beta4(cluster)
		cc.KubernetesVersion, cc.ClusterName, cc.Networking = kubernetesVersion, clusterName, networking
		docs = [2]any{cc, initV1Beta4(init)}
	} else {
		cc := clusterV1Beta3(cluster)
		cc.KubernetesVersion, cc.ClusterName = kubernetesVersion, clusterName
		cc.Networking = kubeadmv1beta3.Networking(networking)
		// v1beta3 knows one init timeout, on the API server.
		cc.APIServer.TimeoutForControlPlane = seconds(init.Timeouts.ControlPlaneComponentHealthCheckSeconds)
		docs = [2]any{cc, initV1Beta3(init)}
	}
	var out bytes.Buffer
	for i, d := range docs {
		b, err := yaml.Marshal(d)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			out.WriteString("---\n")
		}
		out.Write(b)
	}
	return out.Bytes(), nil
}

// RenderJoin renders the file "kubeadm join --config" reads: one
// JoinConfiguration document. Discovery is rendered as given; the caller
// fills a bootstrap token first when the user gave none.
func RenderJoin(join bootstrapv1.JoinConfiguration, kubernetesVersion string) ([]byte, error) {
	apiVersion, err := APIVersionFor(kubernetesVersion)
	if err != nil {
		return nil, err
	}
	if apiVersion == APIVersionV1Beta4 {
		return yaml.Marshal(joinV1Beta4(join))
	}
	return yaml.Marshal(joinV1Beta3(join))
}

// JoinEndpoint is "host:port" of a Cluster API endpoint, IPv6 hosts bracketed.
func JoinEndpoint(e clusterv1.APIEndpoint) string {
	return net.JoinHostPort(e.Host, strconv.Itoa(int(e.Port)))
}

func typeMeta(apiVersion, kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: apiVersion, Kind: kind}
}

// --- v1beta4 ---

func argsV1Beta4(in []bootstrapv1.Arg) []kubeadmv1beta4.Arg {
	if len(in) == 0 {
		return nil
	}
	out := make([]kubeadmv1beta4.Arg, 0, len(in))
	for _, a := range in {
		out = append(out, kubeadmv1beta4.Arg{Name: a.Name, Value: ptr.Deref(a.Value, "")})
	}
	return out
}

func envsV1Beta4(in *[]bootstrapv1.EnvVar) []kubeadmv1beta4.EnvVar {
	if in == nil || len(*in) == 0 {
		return nil
	}
	out := make([]kubeadmv1beta4.EnvVar, 0, len(*in))
	for _, e := range *in {
		out = append(out, kubeadmv1beta4.EnvVar{EnvVar: e.EnvVar})
	}
	return out
}

func volumesV1Beta4(in []bootstrapv1.HostPathMount) []kubeadmv1beta4.HostPathMount {
	if len(in) == 0 {
		return nil
	}
	out := make([]kubeadmv1beta4.HostPathMount, 0, len(in))
	for _, v := range in {
		out = append(out, kubeadmv1beta4.HostPathMount{Name: v.Name, HostPath: v.HostPath, MountPath: v.MountPath, ReadOnly: ptr.Deref(v.ReadOnly, false), PathType: v.PathType})
	}
	return out
}

func days(d int32) *metav1.Duration {
	if d == 0 {
		return nil
	}
	return &metav1.Duration{Duration: time.Duration(d) * 24 * time.Hour}
}

func seconds(s *int32) *metav1.Duration {
	if s == nil {
		return nil
	}
	return &metav1.Duration{Duration: time.Duration(*s) * time.Second}
}

func clusterV1Beta4(in bootstrapv1.ClusterConfiguration) *kubeadmv1beta4.ClusterConfiguration {
	out := &kubeadmv1beta4.ClusterConfiguration{
		TypeMeta:             typeMeta(APIVersionV1Beta4, "ClusterConfiguration"),
		ControlPlaneEndpoint: in.ControlPlaneEndpoint,
		APIServer: kubeadmv1beta4.APIServer{
			ControlPlaneComponent: kubeadmv1beta4.ControlPlaneComponent{
				ExtraArgs: argsV1Beta4(in.APIServer.ExtraArgs), ExtraVolumes: volumesV1Beta4(in.APIServer.ExtraVolumes), ExtraEnvs: envsV1Beta4(in.APIServer.ExtraEnvs),
			},
			CertSANs: in.APIServer.CertSANs,
		},
		ControllerManager: kubeadmv1beta4.ControlPlaneComponent{
			ExtraArgs: argsV1Beta4(in.ControllerManager.ExtraArgs), ExtraVolumes: volumesV1Beta4(in.ControllerManager.ExtraVolumes), ExtraEnvs: envsV1Beta4(in.ControllerManager.ExtraEnvs),
		},
		Scheduler: kubeadmv1beta4.ControlPlaneComponent{
			ExtraArgs: argsV1Beta4(in.Scheduler.ExtraArgs), ExtraVolumes: volumesV1Beta4(in.Scheduler.ExtraVolumes), ExtraEnvs: envsV1Beta4(in.Scheduler.ExtraEnvs),
		},
		DNS:                         kubeadmv1beta4.DNS{ImageMeta: kubeadmv1beta4.ImageMeta{ImageRepository: in.DNS.ImageRepository, ImageTag: in.DNS.ImageTag}},
		CertificatesDir:             in.CertificatesDir,
		ImageRepository:             in.ImageRepository,
		FeatureGates:                in.FeatureGates,
		EncryptionAlgorithm:         kubeadmv1beta4.EncryptionAlgorithmType(in.EncryptionAlgorithm),
		CertificateValidityPeriod:   days(in.CertificateValidityPeriodDays),
		CACertificateValidityPeriod: days(in.CACertificateValidityPeriodDays),
	}
	if l := in.Etcd.Local; l.IsDefined() {
		out.Etcd.Local = &kubeadmv1beta4.LocalEtcd{
			ImageMeta: kubeadmv1beta4.ImageMeta{ImageRepository: l.ImageRepository, ImageTag: l.ImageTag},
			DataDir:   l.DataDir, ExtraArgs: argsV1Beta4(l.ExtraArgs), ExtraEnvs: envsV1Beta4(l.ExtraEnvs),
			ServerCertSANs: l.ServerCertSANs, PeerCertSANs: l.PeerCertSANs,
		}
	}
	if e := in.Etcd.External; e.IsDefined() {
		out.Etcd.External = &kubeadmv1beta4.ExternalEtcd{Endpoints: e.Endpoints, CAFile: e.CAFile, CertFile: e.CertFile, KeyFile: e.KeyFile}
	}
	return out
}

func nodeRegistrationV1Beta4(in bootstrapv1.NodeRegistrationOptions) kubeadmv1beta4.NodeRegistrationOptions {
	return kubeadmv1beta4.NodeRegistrationOptions{
		Name: in.Name, CRISocket: in.CRISocket, Taints: taints(in.Taints),
		KubeletExtraArgs:      argsV1Beta4(in.KubeletExtraArgs),
		IgnorePreflightErrors: in.IgnorePreflightErrors,
		ImagePullPolicy:       in.ImagePullPolicy,
		ImagePullSerial:       in.ImagePullSerial,
	}
}

// taints keeps the difference kubeadm makes between no list (its default
// control-plane taint) and an empty list (no taint at all).
func taints(in *[]corev1.Taint) []corev1.Taint {
	if in == nil {
		return nil
	}
	return append([]corev1.Taint{}, (*in)...)
}

func patches(p bootstrapv1.Patches) *kubeadmv1beta4.Patches {
	if p.Directory == "" {
		return nil
	}
	return &kubeadmv1beta4.Patches{Directory: p.Directory}
}

func timeoutsV1Beta4(t bootstrapv1.Timeouts) *kubeadmv1beta4.Timeouts {
	out := &kubeadmv1beta4.Timeouts{
		ControlPlaneComponentHealthCheck: seconds(t.ControlPlaneComponentHealthCheckSeconds),
		KubeletHealthCheck:               seconds(t.KubeletHealthCheckSeconds),
		KubernetesAPICall:                seconds(t.KubernetesAPICallSeconds),
		EtcdAPICall:                      seconds(t.EtcdAPICallSeconds),
		TLSBootstrap:                     seconds(t.TLSBootstrapSeconds),
		Discovery:                        seconds(t.DiscoverySeconds),
	}
	if *out == (kubeadmv1beta4.Timeouts{}) {
		return nil
	}
	return out
}

func bootstrapTokens(in []bootstrapv1.BootstrapToken) []bootstraptokenv1.BootstrapToken {
	if len(in) == 0 {
		return nil
	}
	out := make([]bootstraptokenv1.BootstrapToken, 0, len(in))
	for _, t := range in {
		bt := bootstraptokenv1.BootstrapToken{
			Token:       &bootstraptokenv1.BootstrapTokenString{ID: t.Token.ID, Secret: t.Token.Secret},
			Description: t.Description, TTL: seconds(t.TTLSeconds), Usages: t.Usages, Groups: t.Groups,
		}
		if !t.Expires.IsZero() {
			bt.Expires = t.Expires.DeepCopy()
		}
		out = append(out, bt)
	}
	return out
}

func initV1Beta4(in bootstrapv1.InitConfiguration) *kubeadmv1beta4.InitConfiguration {
	return &kubeadmv1beta4.InitConfiguration{
		TypeMeta:         typeMeta(APIVersionV1Beta4, "InitConfiguration"),
		BootstrapTokens:  bootstrapTokens(in.BootstrapTokens),
		NodeRegistration: nodeRegistrationV1Beta4(in.NodeRegistration),
		LocalAPIEndpoint: kubeadmv1beta4.APIEndpoint{AdvertiseAddress: in.LocalAPIEndpoint.AdvertiseAddress, BindPort: in.LocalAPIEndpoint.BindPort},
		SkipPhases:       in.SkipPhases,
		Patches:          patches(in.Patches),
		Timeouts:         timeoutsV1Beta4(in.Timeouts),
	}
}

func joinV1Beta4(in bootstrapv1.JoinConfiguration) *kubeadmv1beta4.JoinConfiguration {
	out := &kubeadmv1beta4.JoinConfiguration{
		TypeMeta:         typeMeta(APIVersionV1Beta4, "JoinConfiguration"),
		NodeRegistration: nodeRegistrationV1Beta4(in.NodeRegistration),
		CACertPath:       in.CACertPath,
		SkipPhases:       in.SkipPhases,
		Patches:          patches(in.Patches),
		Timeouts:         timeoutsV1Beta4(in.Timeouts),
	}
	d := in.Discovery
	out.Discovery.TLSBootstrapToken = d.TLSBootstrapToken
	if d.BootstrapToken.IsDefined() {
		out.Discovery.BootstrapToken = &kubeadmv1beta4.BootstrapTokenDiscovery{
			Token: d.BootstrapToken.Token, APIServerEndpoint: d.BootstrapToken.APIServerEndpoint,
			CACertHashes: d.BootstrapToken.CACertHashes, UnsafeSkipCAVerification: ptr.Deref(d.BootstrapToken.UnsafeSkipCAVerification, false),
		}
	}
	if d.File.IsDefined() {
		out.Discovery.File = &kubeadmv1beta4.FileDiscovery{KubeConfigPath: d.File.KubeConfigPath}
	}
	if in.ControlPlane != nil {
		out.ControlPlane = &kubeadmv1beta4.JoinControlPlane{LocalAPIEndpoint: kubeadmv1beta4.APIEndpoint{
			AdvertiseAddress: in.ControlPlane.LocalAPIEndpoint.AdvertiseAddress, BindPort: in.ControlPlane.LocalAPIEndpoint.BindPort,
		}}
	}
	return out
}

// --- v1beta3 ---

// argsV1Beta3 turns the flag list into v1beta3's map. Names are unique
// (the API validates it), so nothing is lost.
func argsV1Beta3(in []bootstrapv1.Arg) map[string]string {
	if len(in) == 0 {
		return nil
	}
	out := make(map[string]string, len(in))
	for _, a := range in {
		out[a.Name] = ptr.Deref(a.Value, "")
	}
	return out
}

func volumesV1Beta3(in []bootstrapv1.HostPathMount) []kubeadmv1beta3.HostPathMount {
	v4 := volumesV1Beta4(in)
	if v4 == nil {
		return nil
	}
	out := make([]kubeadmv1beta3.HostPathMount, 0, len(v4))
	for _, v := range v4 {
		out = append(out, kubeadmv1beta3.HostPathMount(v))
	}
	return out
}

// clusterV1Beta3 drops what v1beta3 cannot say: extra environment
// variables, encryption algorithm and validity periods (all v1.31+ in the
// API's own documentation).
func clusterV1Beta3(in bootstrapv1.ClusterConfiguration) *kubeadmv1beta3.ClusterConfiguration {
	out := &kubeadmv1beta3.ClusterConfiguration{
		TypeMeta:             typeMeta(APIVersionV1Beta3, "ClusterConfiguration"),
		ControlPlaneEndpoint: in.ControlPlaneEndpoint,
		APIServer: kubeadmv1beta3.APIServer{
			ControlPlaneComponent: kubeadmv1beta3.ControlPlaneComponent{ExtraArgs: argsV1Beta3(in.APIServer.ExtraArgs), ExtraVolumes: volumesV1Beta3(in.APIServer.ExtraVolumes)},
			CertSANs:              in.APIServer.CertSANs,
		},
		ControllerManager: kubeadmv1beta3.ControlPlaneComponent{ExtraArgs: argsV1Beta3(in.ControllerManager.ExtraArgs), ExtraVolumes: volumesV1Beta3(in.ControllerManager.ExtraVolumes)},
		Scheduler:         kubeadmv1beta3.ControlPlaneComponent{ExtraArgs: argsV1Beta3(in.Scheduler.ExtraArgs), ExtraVolumes: volumesV1Beta3(in.Scheduler.ExtraVolumes)},
		DNS:               kubeadmv1beta3.DNS{ImageMeta: kubeadmv1beta3.ImageMeta{ImageRepository: in.DNS.ImageRepository, ImageTag: in.DNS.ImageTag}},
		CertificatesDir:   in.CertificatesDir,
		ImageRepository:   in.ImageRepository,
		FeatureGates:      in.FeatureGates,
	}
	if l := in.Etcd.Local; l.IsDefined() {
		out.Etcd.Local = &kubeadmv1beta3.LocalEtcd{
			ImageMeta: kubeadmv1beta3.ImageMeta{ImageRepository: l.ImageRepository, ImageTag: l.ImageTag},
			DataDir:   l.DataDir, ExtraArgs: argsV1Beta3(l.ExtraArgs),
			ServerCertSANs: l.ServerCertSANs, PeerCertSANs: l.PeerCertSANs,
		}
	}
	if e := in.Etcd.External; e.IsDefined() {
		out.Etcd.External = &kubeadmv1beta3.ExternalEtcd{Endpoints: e.Endpoints, CAFile: e.CAFile, CertFile: e.CertFile, KeyFile: e.KeyFile}
	}
	return out
}

func nodeRegistrationV1Beta3(in bootstrapv1.NodeRegistrationOptions) kubeadmv1beta3.NodeRegistrationOptions {
	return kubeadmv1beta3.NodeRegistrationOptions{
		Name: in.Name, CRISocket: in.CRISocket, Taints: taints(in.Taints),
		KubeletExtraArgs:      argsV1Beta3(in.KubeletExtraArgs),
		IgnorePreflightErrors: in.IgnorePreflightErrors,
		ImagePullPolicy:       in.ImagePullPolicy,
	}
}

func patchesV1Beta3(p bootstrapv1.Patches) *kubeadmv1beta3.Patches {
	if p.Directory == "" {
		return nil
	}
	return &kubeadmv1beta3.Patches{Directory: p.Directory}
}

// initV1Beta3 converts an InitConfiguration; v1beta3 keeps its one init
// timeout on the ClusterConfiguration, which RenderInit fills.
func initV1Beta3(in bootstrapv1.InitConfiguration) *kubeadmv1beta3.InitConfiguration {
	return &kubeadmv1beta3.InitConfiguration{
		TypeMeta:         typeMeta(APIVersionV1Beta3, "InitConfiguration"),
		BootstrapTokens:  bootstrapTokens(in.BootstrapTokens),
		NodeRegistration: nodeRegistrationV1Beta3(in.NodeRegistration),
		LocalAPIEndpoint: kubeadmv1beta3.APIEndpoint{AdvertiseAddress: in.LocalAPIEndpoint.AdvertiseAddress, BindPort: in.LocalAPIEndpoint.BindPort},
		SkipPhases:       in.SkipPhases,
		Patches:          patchesV1Beta3(in.Patches),
	}
}

func joinV1Beta3(in bootstrapv1.JoinConfiguration) *kubeadmv1beta3.JoinConfiguration {
	out := &kubeadmv1beta3.JoinConfiguration{
		TypeMeta:         typeMeta(APIVersionV1Beta3, "JoinConfiguration"),
		NodeRegistration: nodeRegistrationV1Beta3(in.NodeRegistration),
		CACertPath:       in.CACertPath,
		SkipPhases:       in.SkipPhases,
		Patches:          patchesV1Beta3(in.Patches),
	}
	d := in.Discovery
	out.Discovery.TLSBootstrapToken = d.TLSBootstrapToken
	// v1beta3 has a single discovery timeout where v1beta4 has per-step ones.
	out.Discovery.Timeout = seconds(in.Timeouts.DiscoverySeconds)
	if d.BootstrapToken.IsDefined() {
		out.Discovery.BootstrapToken = &kubeadmv1beta3.BootstrapTokenDiscovery{
			Token: d.BootstrapToken.Token, APIServerEndpoint: d.BootstrapToken.APIServerEndpoint,
			CACertHashes: d.BootstrapToken.CACertHashes, UnsafeSkipCAVerification: ptr.Deref(d.BootstrapToken.UnsafeSkipCAVerification, false),
		}
	}
	if d.File.IsDefined() {
		out.Discovery.File = &kubeadmv1beta3.FileDiscovery{KubeConfigPath: d.File.KubeConfigPath}
	}
	if in.ControlPlane != nil {
		out.ControlPlane = &kubeadmv1beta3.JoinControlPlane{LocalAPIEndpoint: kubeadmv1beta3.APIEndpoint{
			AdvertiseAddress: in.ControlPlane.LocalAPIEndpoint.AdvertiseAddress, BindPort: in.ControlPlane.LocalAPIEndpoint.BindPort,
		}}
	}
	return out
}
