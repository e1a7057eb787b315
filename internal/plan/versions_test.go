package plan

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

func TestCountVersions(t *testing.T) {
	machine := func(spec, kubelet string) *clusterv1.Machine {
		m := &clusterv1.Machine{Spec: clusterv1.MachineSpec{Version: spec}}
		if kubelet != "" {
			m.Status.NodeInfo = &corev1.NodeSystemInfo{KubeletVersion: kubelet}
		}
		return m
	}
	for _, tc := range []struct {
		name     string
		machines []*clusterv1.Machine
		want     []clusterv1.StatusVersion
	}{
		{"none", nil, nil},
		{"only Machines without a version", []*clusterv1.Machine{machine("", "")}, nil},
		{"one version", []*clusterv1.Machine{machine("v1.34.1", ""), machine("v1.34.1", "")},
			[]clusterv1.StatusVersion{{Version: "v1.34.1", Replicas: 2}}},
		{"an upgrade under way, lowest first, v1.9 below v1.10",
			[]*clusterv1.Machine{machine("v1.10.0", ""), machine("v1.9.3", ""), machine("v1.10.0", ""), machine("v1.9.3", "")},
			[]clusterv1.StatusVersion{{Version: "v1.9.3", Replicas: 2}, {Version: "v1.10.0", Replicas: 2}}},
		{"the kubelet's version wins over the spec's",
			[]*clusterv1.Machine{machine("v1.34.1", "v1.33.4"), machine("v1.34.1", "")},
			[]clusterv1.StatusVersion{{Version: "v1.33.4", Replicas: 1}, {Version: "v1.34.1", Replicas: 1}}},
		{"a pre-release before its release, an unparsable version last",
			[]*clusterv1.Machine{machine("latest", ""), machine("v1.35.0", ""), machine("v1.35.0-rc.1", "")},
			[]clusterv1.StatusVersion{{Version: "v1.35.0-rc.1", Replicas: 1}, {Version: "v1.35.0", Replicas: 1}, {Version: "latest", Replicas: 1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := CountVersions(tc.machines); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestSumVersions(t *testing.T) {
	old := []clusterv1.StatusVersion{{Version: "v1.33.4", Replicas: 2}}
	rolling := []clusterv1.StatusVersion{{Version: "v1.33.4", Replicas: 1}, {Version: "v1.34.1", Replicas: 2}}
	want := []clusterv1.StatusVersion{{Version: "v1.33.4", Replicas: 3}, {Version: "v1.34.1", Replicas: 2}}
	if got := SumVersions(rolling, old, nil); !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if got := SumVersions(nil, nil); got != nil {
		t.Errorf("nothing to add up gave %+v, want nil", got)
	}
}
