package kubeadm

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	kubeadmapi "k8s.io/kubernetes/cmd/kubeadm/app/apis/kubeadm"
	kubeadmscheme "k8s.io/kubernetes/cmd/kubeadm/app/apis/kubeadm/scheme"
	kubeadmv1beta4 "k8s.io/kubernetes/cmd/kubeadm/app/apis/kubeadm/v1beta4"
	"sigs.k8s.io/yaml"
)

// Group is the API group of kubeadm's configuration kinds.
const Group = "kubeadm.k8s.io"

// Documents is a parsed kubeadm configuration file, converted to kubeadm's
// internal types and defaulted. A kind the file does not contain is nil.
type Documents struct {
	Cluster *kubeadmapi.ClusterConfiguration
	// Init, when set, also carries Cluster (or an empty, defaulted
	// ClusterConfiguration when the file has none), as kubeadm does.
	Init *kubeadmapi.InitConfiguration
	Join *kubeadmapi.JoinConfiguration
	// Ignored lists the documents that are not kubeadm configuration kinds
	// (KubeletConfiguration, KubeProxyConfiguration, ...) as
	// "document N: apiVersion/kind". They are reported, not acted on.
	Ignored []string
	// Warnings lists fields kubeadm would not recognise either (unknown or
	// duplicate keys); like kubeadm, they are reported rather than refused.
	Warnings []string
}

var (
	// lenient decodes and defaults into the internal types.
	lenient = kubeadmscheme.Codecs.UniversalDecoder()
	// strict only finds unknown and duplicate fields for Warnings.
	strict = serializer.NewCodecFactory(kubeadmscheme.Scheme, serializer.EnableStrict).UniversalDecoder()
)

// Parse reads a kubeadm configuration file: YAML documents separated by
// "---" lines, each a ClusterConfiguration, InitConfiguration or
// JoinConfiguration of apiVersion kubeadm.k8s.io/v1beta3 or v1beta4. Other
// kinds are listed in Ignored. Errors name the document (1-based) and, for
// decoding problems, the field.
func Parse(data []byte) (Documents, error) {
	var docs Documents
	var errs []error
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for n := 1; ; n++ {
		raw, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return Documents{}, fmt.Errorf("kubeadm configuration document %d: %w", n, err)
		}
		if len(bytes.TrimSpace(stripComments(raw))) == 0 {
			n--
			continue
		}
		if err := docs.add(n, raw); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return Documents{}, errors.Join(errs...)
	}
	if docs.Cluster == nil && docs.Init == nil && docs.Join == nil {
		return Documents{}, errors.New("kubeadm configuration: no ClusterConfiguration, InitConfiguration or JoinConfiguration document (apiVersion kubeadm.k8s.io/v1beta3 or v1beta4)")
	}
	if docs.Init != nil {
		if docs.Cluster != nil {
			docs.Init.ClusterConfiguration = *docs.Cluster
		} else {
			// kubeadm init without a ClusterConfiguration uses a defaulted one.
			cc, err := defaultedClusterConfiguration()
			if err != nil {
				return Documents{}, err
			}
			docs.Init.ClusterConfiguration = *cc
		}
	}
	return docs, nil
}

// stripComments drops whole-line comments so a document holding only a
// comment counts as empty.
func stripComments(b []byte) []byte {
	var out bytes.Buffer
	for _, line := range bytes.Split(b, []byte("\n")) {
		if t := bytes.TrimSpace(line); len(t) > 0 && t[0] == '#' {
			continue
		}
		out.Write(line)
		out.WriteByte('\n')
	}
	return out.Bytes()
}

func (d *Documents) add(n int, raw []byte) error {
	var meta struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := yaml.Unmarshal(raw, &meta); err != nil {
		return fmt.Errorf("kubeadm configuration document %d: not a YAML mapping: %w", n, err)
	}
	if meta.APIVersion == "" || meta.Kind == "" {
		return fmt.Errorf("kubeadm configuration document %d: apiVersion and kind are required (for example apiVersion: kubeadm.k8s.io/v1beta4, kind: InitConfiguration)", n)
	}
	gv, err := schema.ParseGroupVersion(meta.APIVersion)
	if err != nil {
		return fmt.Errorf("kubeadm configuration document %d: apiVersion %q: %w", n, meta.APIVersion, err)
	}
	name := fmt.Sprintf("document %d (%s %s)", n, meta.APIVersion, meta.Kind)
	if gv.Group != Group {
		d.Ignored = append(d.Ignored, fmt.Sprintf("document %d: %s/%s", n, meta.APIVersion, meta.Kind))
		return nil
	}
	switch meta.Kind {
	case "ClusterConfiguration", "InitConfiguration", "JoinConfiguration":
	default:
		// Reset/Upgrade configurations and the like are kubeadm's, but not
		// for init or join.
		d.Ignored = append(d.Ignored, fmt.Sprintf("document %d: %s/%s", n, meta.APIVersion, meta.Kind))
		return nil
	}
	if gv.Version != "v1beta3" && gv.Version != "v1beta4" {
		return fmt.Errorf("kubeadm configuration %s: apiVersion %s is not supported; use kubeadm.k8s.io/v1beta4 (or v1beta3)", name, meta.APIVersion)
	}
	obj, err := runtime.Decode(lenient, raw)
	if err != nil {
		return fmt.Errorf("kubeadm configuration %s: %w", name, err)
	}
	if _, err := runtime.Decode(strict, raw); err != nil {
		if !runtime.IsStrictDecodingError(err) {
			return fmt.Errorf("kubeadm configuration %s: %w", name, err)
		}
		for _, e := range err.(interface{ Errors() []error }).Errors() {
			d.Warnings = append(d.Warnings, fmt.Sprintf("%s: %v", name, e))
		}
	}
	switch o := obj.(type) {
	case *kubeadmapi.ClusterConfiguration:
		if d.Cluster != nil {
			return fmt.Errorf("kubeadm configuration %s: a second ClusterConfiguration; a file holds at most one of each kind", name)
		}
		d.Cluster = o
	case *kubeadmapi.InitConfiguration:
		if d.Init != nil {
			return fmt.Errorf("kubeadm configuration %s: a second InitConfiguration; a file holds at most one of each kind", name)
		}
		d.Init = o
	case *kubeadmapi.JoinConfiguration:
		if d.Join != nil {
			return fmt.Errorf("kubeadm configuration %s: a second JoinConfiguration; a file holds at most one of each kind", name)
		}
		d.Join = o
	default:
		return fmt.Errorf("kubeadm configuration %s: decoded as unexpected type %T", name, obj)
	}
	return nil
}

// defaultedClusterConfiguration is what kubeadm uses when a file has no
// ClusterConfiguration: the newest version's defaults.
func defaultedClusterConfiguration() (*kubeadmapi.ClusterConfiguration, error) {
	obj, err := runtime.Decode(lenient, []byte("apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\n"))
	if err != nil {
		return nil, fmt.Errorf("defaulting a ClusterConfiguration: %w", err)
	}
	return obj.(*kubeadmapi.ClusterConfiguration), nil
}

// ArgsMap turns kubeadm's ordered extraArgs into a map; for a name given
// more than once the last value wins, as on a command line.
func ArgsMap(args []kubeadmapi.Arg) map[string]string {
	if len(args) == 0 {
		return nil
	}
	m := make(map[string]string, len(args))
	for _, a := range args {
		m[strings.TrimLeft(a.Name, "-")] = a.Value
	}
	return m
}

// MarshalClusterConfiguration writes cfg as kubeadm.k8s.io/v1beta4 YAML,
// the form kubeadm stores in the kube-system/kubeadm-config ConfigMap.
func MarshalClusterConfiguration(cfg *kubeadmapi.ClusterConfiguration) ([]byte, error) {
	info, ok := runtime.SerializerInfoForMediaType(kubeadmscheme.Codecs.SupportedMediaTypes(), runtime.ContentTypeYAML)
	if !ok {
		return nil, errors.New("kubeadm scheme has no YAML serializer")
	}
	enc := kubeadmscheme.Codecs.EncoderForVersion(info.Serializer, kubeadmv1beta4.SchemeGroupVersion)
	c := cfg.DeepCopy()
	c.ComponentConfigs = nil
	return runtime.Encode(enc, c)
}
