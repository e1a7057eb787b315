package plan

import (
	"strconv"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

// DefaultReplicas is the number of replicas a MachineSet or MachinePool
// without spec.replicas gets: the cluster autoscaler's minimum size when
// both of its bounds are annotated, otherwise 1.
func DefaultReplicas(annotations map[string]string) int32 {
	minSize, okMin := annotations[clusterv1.AutoscalerMinSizeAnnotation]
	_, okMax := annotations[clusterv1.AutoscalerMaxSizeAnnotation]
	if okMin && okMax {
		if n, err := strconv.ParseInt(minSize, 10, 32); err == nil && n >= 0 {
			return int32(n)
		}
	}
	return 1
}
