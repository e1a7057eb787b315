package plan

import (
	"reflect"
	"testing"

	addonsv1 "capstan.dev/capstan/api/addons/v1beta2"
)

func TestPlanAddons(t *testing.T) {
	cm := addonsv1.ResourceRef{Kind: "ConfigMap", Name: "cni"}
	sec := addonsv1.ResourceRef{Kind: "Secret", Name: "cni"} // same name, other kind: another resource
	both := []AddonResource{{Ref: cm, Hash: "sha256:a"}, {Ref: sec, Hash: "sha256:b"}}
	applied := func(h string) AddonRecord { return AddonRecord{Applied: true, Hash: h} }
	once, rec := addonsv1.ClusterResourceSetStrategyApplyOnce, addonsv1.ClusterResourceSetStrategyReconcile
	tests := []struct {
		name      string
		strategy  addonsv1.ClusterResourceSetStrategy
		resources []AddonResource
		clusters  []AddonCluster
		apply     map[string][]addonsv1.ResourceRef
		waiting   []string
	}{
		{name: "new initialised cluster gets everything, in spec order", strategy: once, resources: both,
			clusters: []AddonCluster{{Name: "c1", ControlPlaneInitialized: true}},
			apply:    map[string][]addonsv1.ResourceRef{"c1": {cm, sec}}},
		{name: "cluster not initialised waits", strategy: once, resources: both,
			clusters: []AddonCluster{{Name: "c1"}, {Name: "c2", ControlPlaneInitialized: true}},
			apply:    map[string][]addonsv1.ResourceRef{"c2": {cm, sec}}, waiting: []string{"c1"}},
		{name: "deleting cluster gets nothing and does not wait", strategy: rec, resources: both,
			clusters: []AddonCluster{{Name: "c1", ControlPlaneInitialized: true, Deleting: true}, {Name: "c2", Deleting: true}}},
		{name: "ApplyOnce: applied stays applied after a change", strategy: once, resources: both,
			clusters: []AddonCluster{{Name: "c1", ControlPlaneInitialized: true,
				Records: map[addonsv1.ResourceRef]AddonRecord{cm: applied("sha256:old"), sec: applied("sha256:b")}}}},
		{name: "unset strategy behaves as ApplyOnce", resources: both,
			clusters: []AddonCluster{{Name: "c1", ControlPlaneInitialized: true,
				Records: map[addonsv1.ResourceRef]AddonRecord{cm: applied("sha256:old"), sec: applied("sha256:b")}}}},
		{name: "ApplyOnce: a failed application is retried", strategy: once, resources: both,
			clusters: []AddonCluster{{Name: "c1", ControlPlaneInitialized: true,
				Records: map[addonsv1.ResourceRef]AddonRecord{cm: {Hash: "sha256:a"}, sec: applied("sha256:b")}}},
			apply: map[string][]addonsv1.ResourceRef{"c1": {cm}}},
		{name: "Reconcile: unchanged is left alone", strategy: rec, resources: both,
			clusters: []AddonCluster{{Name: "c1", ControlPlaneInitialized: true,
				Records: map[addonsv1.ResourceRef]AddonRecord{cm: applied("sha256:a"), sec: applied("sha256:b")}}}},
		{name: "Reconcile: changed hash is applied again", strategy: rec, resources: both,
			clusters: []AddonCluster{{Name: "c1", ControlPlaneInitialized: true,
				Records: map[addonsv1.ResourceRef]AddonRecord{cm: applied("sha256:old"), sec: applied("sha256:b")}}},
			apply: map[string][]addonsv1.ResourceRef{"c1": {cm}}},
		{name: "Reconcile: failed application is retried even with the same hash", strategy: rec, resources: both,
			clusters: []AddonCluster{{Name: "c1", ControlPlaneInitialized: true,
				Records: map[addonsv1.ResourceRef]AddonRecord{cm: applied("sha256:a"), sec: {Hash: "sha256:b"}}}},
			apply: map[string][]addonsv1.ResourceRef{"c1": {sec}}},
		{name: "unusable resource is applied nowhere", strategy: rec,
			resources: []AddonResource{{Ref: cm}, {Ref: sec, Hash: "sha256:b"}},
			clusters:  []AddonCluster{{Name: "c1", ControlPlaneInitialized: true}, {Name: "c2", ControlPlaneInitialized: true}},
			apply:     map[string][]addonsv1.ResourceRef{"c1": {sec}, "c2": {sec}}},
		{name: "each cluster by its own records", strategy: once, resources: both,
			clusters: []AddonCluster{
				{Name: "old", ControlPlaneInitialized: true, Records: map[addonsv1.ResourceRef]AddonRecord{cm: applied("sha256:a"), sec: applied("sha256:b")}},
				{Name: "new", ControlPlaneInitialized: true},
			},
			apply: map[string][]addonsv1.ResourceRef{"new": {cm, sec}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := PlanAddons(tt.strategy, tt.resources, tt.clusters)
			want := tt.apply
			if want == nil {
				want = map[string][]addonsv1.ResourceRef{}
			}
			if !reflect.DeepEqual(got.Apply, want) {
				t.Errorf("apply %v, want %v", got.Apply, want)
			}
			if !reflect.DeepEqual(got.Waiting, tt.waiting) {
				t.Errorf("waiting %v, want %v", got.Waiting, tt.waiting)
			}
		})
	}
}
