package contract

import (
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

// A Path is a field path in a provider object, as the contract names it.
type Path []string

func (p Path) String() string {
	s := ""
	for i, f := range p {
		if i > 0 {
			s += "."
		}
		s += f
	}
	return s
}

// The contract's paths. Where v1beta1 used another field, it is the
// fallback, read only when the v1beta2 field is absent.
var (
	specProviderID           = Path{"spec", "providerID"}
	specFailureDomain        = Path{"spec", "failureDomain"}
	specControlPlaneEndpoint = Path{"spec", "controlPlaneEndpoint"}
	specReplicas             = Path{"spec", "replicas"}
	specVersion              = Path{"spec", "version"}

	statusProvisioned             = Path{"status", "initialization", "provisioned"}
	statusReady                   = Path{"status", "ready"} // v1beta1
	statusDataSecretCreated       = Path{"status", "initialization", "dataSecretCreated"}
	statusDataSecretName          = Path{"status", "dataSecretName"}
	statusControlPlaneInitialized = Path{"status", "initialization", "controlPlaneInitialized"}
	statusInitialized             = Path{"status", "initialized"} // v1beta1
	statusAddresses               = Path{"status", "addresses"}
	statusFailureDomain           = Path{"status", "failureDomain"}
	statusFailureDomains          = Path{"status", "failureDomains"}
	statusReplicas                = Path{"status", "replicas"}
	statusReadyReplicas           = Path{"status", "readyReplicas"}
	statusAvailableReplicas       = Path{"status", "availableReplicas"}
	statusUpToDateReplicas        = Path{"status", "upToDateReplicas"}
	statusVersion                 = Path{"status", "version"}
	statusSelector                = Path{"status", "selector"}
)

// boolWithFallback reads a v1beta2 boolean, or its v1beta1 fallback; absent
// counts as false.
func boolWithFallback(u *unstructured.Unstructured, path, fallback Path) (bool, error) {
	v, found, err := unstructured.NestedBool(u.Object, path...)
	if err != nil {
		return false, fmt.Errorf("%s %s: %s: %w", u.GetKind(), u.GetName(), path, err)
	}
	if found {
		return v, nil
	}
	v, _, err = unstructured.NestedBool(u.Object, fallback...)
	if err != nil {
		return false, fmt.Errorf("%s %s: %s: %w", u.GetKind(), u.GetName(), fallback, err)
	}
	return v, nil
}

func optionalString(u *unstructured.Unstructured, path Path) (string, error) {
	v, _, err := unstructured.NestedString(u.Object, path...)
	if err != nil {
		return "", fmt.Errorf("%s %s: %s: %w", u.GetKind(), u.GetName(), path, err)
	}
	return v, nil
}

func optionalInt32(u *unstructured.Unstructured, path Path) (*int32, error) {
	v, found, err := unstructured.NestedFieldNoCopy(u.Object, path...)
	if err != nil || !found || v == nil {
		return nil, err
	}
	var n int64
	switch x := v.(type) {
	case int64:
		n = x
	case float64:
		n = int64(x)
	case int32:
		n = int64(x)
	case int:
		n = int64(x)
	default:
		return nil, fmt.Errorf("%s %s: %s is %T, want an integer", u.GetKind(), u.GetName(), path, v)
	}
	r := int32(n)
	return &r, nil
}

// InfrastructureProvisioned tells whether an infrastructure cluster or
// machine says it is provisioned.
func InfrastructureProvisioned(u *unstructured.Unstructured) (bool, error) {
	return boolWithFallback(u, statusProvisioned, statusReady)
}

// ProviderID is an infrastructure machine's spec.providerID.
func ProviderID(u *unstructured.Unstructured) (string, error) {
	return optionalString(u, specProviderID)
}

// FailureDomain is an infrastructure machine's spec.failureDomain.
func FailureDomain(u *unstructured.Unstructured) (string, error) {
	return optionalString(u, specFailureDomain)
}

// PlacedFailureDomain is the failure domain an infrastructure machine
// reports it was placed in (status.failureDomain); empty when it reports none.
func PlacedFailureDomain(u *unstructured.Unstructured) (string, error) {
	return optionalString(u, statusFailureDomain)
}

// Addresses are an infrastructure machine's status.addresses.
func Addresses(u *unstructured.Unstructured) ([]clusterv1.MachineAddress, error) {
	raw, found, err := unstructured.NestedSlice(u.Object, statusAddresses...)
	if err != nil || !found {
		return nil, err
	}
	out := make([]clusterv1.MachineAddress, 0, len(raw))
	for i, item := range raw {
		m, ok := item.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s %s: %s[%d] is not an object", u.GetKind(), u.GetName(), statusAddresses, i)
		}
		t, _ := m["type"].(string)
		a, _ := m["address"].(string)
		out = append(out, clusterv1.MachineAddress{Type: clusterv1.MachineAddressType(t), Address: a})
	}
	return out, nil
}

// ControlPlaneEndpoint is an infrastructure cluster's or control plane's
// spec.controlPlaneEndpoint; the zero value when unset.
func ControlPlaneEndpoint(u *unstructured.Unstructured) (clusterv1.APIEndpoint, error) {
	var ep clusterv1.APIEndpoint
	host, _, err := unstructured.NestedString(u.Object, append(append(Path{}, specControlPlaneEndpoint...), "host")...)
	if err != nil {
		return ep, fmt.Errorf("%s %s: %s.host: %w", u.GetKind(), u.GetName(), specControlPlaneEndpoint, err)
	}
	port, err := optionalInt32(u, append(append(Path{}, specControlPlaneEndpoint...), "port"))
	if err != nil {
		return ep, err
	}
	ep.Host = host
	if port != nil {
		ep.Port = *port
	}
	return ep, nil
}

// FailureDomains reads an infrastructure cluster's status.failureDomains:
// a list in v1beta2, a map keyed by name in v1beta1. The result is sorted
// by name.
func FailureDomains(u *unstructured.Unstructured) ([]clusterv1.FailureDomain, error) {
	raw, found, err := unstructured.NestedFieldNoCopy(u.Object, statusFailureDomains...)
	if err != nil || !found || raw == nil {
		return nil, err
	}
	var out []clusterv1.FailureDomain
	add := func(name string, spec map[string]any) {
		fd := clusterv1.FailureDomain{Name: name}
		if cp, ok := spec["controlPlane"].(bool); ok {
			fd.ControlPlane = &cp
		}
		if attrs, ok := spec["attributes"].(map[string]any); ok {
			fd.Attributes = map[string]string{}
			for k, v := range attrs {
				if s, ok := v.(string); ok {
					fd.Attributes[k] = s
				}
			}
		}
		out = append(out, fd)
	}
	switch domains := raw.(type) {
	case []any:
		for i, item := range domains {
			m, ok := item.(map[string]any)
			name, _ := m["name"].(string)
			if !ok || name == "" {
				return nil, fmt.Errorf("%s %s: %s[%d] has no name", u.GetKind(), u.GetName(), statusFailureDomains, i)
			}
			add(name, m)
		}
	case map[string]any:
		for name, item := range domains {
			m, _ := item.(map[string]any)
			add(name, m)
		}
	default:
		return nil, fmt.Errorf("%s %s: %s is %T, want a list", u.GetKind(), u.GetName(), statusFailureDomains, raw)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// DataSecretCreated tells whether a bootstrap config has written its data
// secret.
func DataSecretCreated(u *unstructured.Unstructured) (bool, error) {
	return boolWithFallback(u, statusDataSecretCreated, statusReady)
}

// DataSecretName is a bootstrap config's status.dataSecretName.
func DataSecretName(u *unstructured.Unstructured) (string, error) {
	return optionalString(u, statusDataSecretName)
}

// ControlPlaneInitialized tells whether a control plane says its API server
// has come up once.
func ControlPlaneInitialized(u *unstructured.Unstructured) (bool, error) {
	return boolWithFallback(u, statusControlPlaneInitialized, statusInitialized)
}

// ControlPlaneReplicas are a control plane's replica counters; nil where the
// provider does not report one (a control plane without machines).
type ControlPlaneReplicas struct {
	Desired, Current, Ready, Available, UpToDate *int32
}

// Replicas reads a control plane's replica counters.
func Replicas(u *unstructured.Unstructured) (ControlPlaneReplicas, error) {
	var r ControlPlaneReplicas
	for _, f := range []struct {
		into **int32
		path Path
	}{
		{&r.Desired, specReplicas},
		{&r.Current, statusReplicas},
		{&r.Ready, statusReadyReplicas},
		{&r.Available, statusAvailableReplicas},
		{&r.UpToDate, statusUpToDateReplicas},
	} {
		v, err := optionalInt32(u, f.path)
		if err != nil {
			return r, err
		}
		*f.into = v
	}
	return r, nil
}

// Version is a control plane's status.version, or its spec.version when it
// reports none yet.
func Version(u *unstructured.Unstructured) (string, error) {
	v, err := optionalString(u, statusVersion)
	if err != nil || v != "" {
		return v, err
	}
	return optionalString(u, specVersion)
}

// Selector is a control plane's status.selector.
func Selector(u *unstructured.Unstructured) (string, error) { return optionalString(u, statusSelector) }
