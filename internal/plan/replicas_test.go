package plan

import (
	"testing"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

func TestDefaultReplicas(t *testing.T) {
	for _, tt := range []struct {
		annotations map[string]string
		want        int32
	}{
		{nil, 1},
		{map[string]string{clusterv1.AutoscalerMinSizeAnnotation: "3"}, 1},
		{map[string]string{clusterv1.AutoscalerMinSizeAnnotation: "3", clusterv1.AutoscalerMaxSizeAnnotation: "5"}, 3},
		{map[string]string{clusterv1.AutoscalerMinSizeAnnotation: "x", clusterv1.AutoscalerMaxSizeAnnotation: "5"}, 1},
	} {
		if got := DefaultReplicas(tt.annotations); got != tt.want {
			t.Errorf("DefaultReplicas(%v) = %d, want %d", tt.annotations, got, tt.want)
		}
	}
}
