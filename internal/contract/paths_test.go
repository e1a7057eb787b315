package contract

import (
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

func obj(status map[string]any, spec map[string]any) *unstructured.Unstructured {
	o := map[string]any{"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "TestMachine",
		"metadata": map[string]any{"name": "m"}}
	if status != nil {
		o["status"] = status
	}
	if spec != nil {
		o["spec"] = spec
	}
	return &unstructured.Unstructured{Object: o}
}

func TestProvisionedPrefersV1beta2AndFallsBack(t *testing.T) {
	for name, tc := range map[string]struct {
		status map[string]any
		want   bool
	}{
		"absent":                   {nil, false},
		"v1beta2 true":             {map[string]any{"initialization": map[string]any{"provisioned": true}}, true},
		"v1beta1 ready":            {map[string]any{"ready": true}, true},
		"v1beta2 false wins":       {map[string]any{"initialization": map[string]any{"provisioned": false}, "ready": true}, false},
		"initialization, no field": {map[string]any{"initialization": map[string]any{}, "ready": true}, true},
	} {
		got, err := InfrastructureProvisioned(obj(tc.status, nil))
		if err != nil || got != tc.want {
			t.Errorf("%s: got %v, %v; want %v", name, got, err, tc.want)
		}
	}
	if _, err := InfrastructureProvisioned(obj(map[string]any{"ready": "yes"}, nil)); err == nil {
		t.Error("a string where a bool belongs was accepted")
	}
}

func TestFailureDomainsListAndMap(t *testing.T) {
	yes := true
	want := []clusterv1.FailureDomain{
		{Name: "a", ControlPlane: &yes, Attributes: map[string]string{"rack": "1"}},
		{Name: "b"},
	}
	list := obj(map[string]any{"failureDomains": []any{
		map[string]any{"name": "b"},
		map[string]any{"name": "a", "controlPlane": true, "attributes": map[string]any{"rack": "1"}},
	}}, nil)
	legacy := obj(map[string]any{"failureDomains": map[string]any{
		"a": map[string]any{"controlPlane": true, "attributes": map[string]any{"rack": "1"}},
		"b": map[string]any{},
	}}, nil)
	for name, u := range map[string]*unstructured.Unstructured{"v1beta2 list": list, "v1beta1 map": legacy} {
		got, err := FailureDomains(u)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got %+v, %v", name, got, err)
		}
	}
}

func TestControlPlaneFields(t *testing.T) {
	u := obj(
		map[string]any{"initialized": true, "replicas": int64(3), "readyReplicas": int64(2), "version": "v1.35.0"},
		map[string]any{"replicas": int64(3), "controlPlaneEndpoint": map[string]any{"host": "10.0.0.1", "port": int64(6443)}},
	)
	if ok, err := ControlPlaneInitialized(u); !ok || err != nil {
		t.Errorf("initialized: %v %v", ok, err)
	}
	r, err := Replicas(u)
	if err != nil || *r.Desired != 3 || *r.Current != 3 || *r.Ready != 2 || r.Available != nil {
		t.Errorf("replicas: %+v %v", r, err)
	}
	ep, err := ControlPlaneEndpoint(u)
	if err != nil || ep != (clusterv1.APIEndpoint{Host: "10.0.0.1", Port: 6443}) {
		t.Errorf("endpoint: %+v %v", ep, err)
	}
	if v, _ := Version(u); v != "v1.35.0" {
		t.Errorf("version %q", v)
	}
}

func TestNewestContractVersion(t *testing.T) {
	for label, want := range map[string]string{
		"":                          "",
		"v1beta2":                   "v1beta2",
		"v1beta1_v1beta2":           "v1beta2",
		"v1alpha4_v1beta1":          "v1beta1",
		"v1beta2_v1":                "v1",
		"v1alpha3_v1alpha4_v1beta1": "v1beta1",
	} {
		if got := newestContractVersion(label); got != want {
			t.Errorf("%q: got %q, want %q", label, got, want)
		}
	}
}

func TestCRDName(t *testing.T) {
	for kind, want := range map[string]string{
		"LocalMachine":        "localmachines.infrastructure.cluster.x-k8s.io",
		"AWSMachineTemplate":  "awsmachinetemplates.infrastructure.cluster.x-k8s.io",
		"KubeadmControlPlane": "kubeadmcontrolplanes.infrastructure.cluster.x-k8s.io",
		"VSphereMachineClass": "vspheremachineclasses.infrastructure.cluster.x-k8s.io",
	} {
		if got := CRDName("infrastructure.cluster.x-k8s.io", kind); got != want {
			t.Errorf("%s: %s, want %s", kind, got, want)
		}
	}
}

func TestReadInfraMachinePool(t *testing.T) {
	u := obj(
		map[string]any{"initialization": map[string]any{"provisioned": true}, "replicas": int64(2), "infrastructureMachineKind": "FooMachine"},
		map[string]any{"providerIDList": []any{"foo://a", "foo://b"}},
	)
	got, err := ReadInfraMachinePool(u)
	if err != nil || !got.Provisioned || got.Replicas == nil || *got.Replicas != 2 || got.InfrastructureMachineKind != "FooMachine" ||
		!reflect.DeepEqual(got.ProviderIDList, []string{"foo://a", "foo://b"}) {
		t.Errorf("got %+v, %v", got, err)
	}
	// A v1beta1 pool: status.ready, no replicas, no machine kind.
	got, err = ReadInfraMachinePool(obj(map[string]any{"ready": true}, nil))
	if err != nil || !got.Provisioned || got.Replicas != nil || got.InfrastructureMachineKind != "" || got.ProviderIDList != nil {
		t.Errorf("v1beta1: got %+v, %v", got, err)
	}
	if _, err := ReadInfraMachinePool(obj(nil, map[string]any{"providerIDList": "foo://a"})); err == nil {
		t.Error("a string where a list belongs was accepted")
	}
}
