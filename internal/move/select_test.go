package move

import "testing"

// Which CRDs a move considers, by their labels: Cluster API's and any
// provider's, not clusterctl's inventory (each management cluster records
// its own providers, and clusterctl does not move it either).
func TestSelectedCRDLabels(t *testing.T) {
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   bool
	}{
		{"contract label", map[string]string{"cluster.x-k8s.io/v1beta2": "v1beta2"}, true},
		{"clusterctl label", map[string]string{"clusterctl.cluster.x-k8s.io": ""}, true},
		{"provider label", map[string]string{"cluster.x-k8s.io/provider": "infrastructure-aws"}, true},
		{"move label only", map[string]string{MoveLabel: ""}, true},
		{"clusterctl inventory", map[string]string{"clusterctl.cluster.x-k8s.io/core": "inventory"}, false},
		{"unrelated", map[string]string{"app": "x"}, false},
	} {
		if got := selected(tc.labels); got != tc.want {
			t.Errorf("%s: selected(%v) = %v, want %v", tc.name, tc.labels, got, tc.want)
		}
	}
}
