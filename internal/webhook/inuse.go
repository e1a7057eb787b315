package webhook

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

// autoscalerAnnotations are the annotations by which the cluster autoscaler
// takes a MachineDeployment's replicas over.
var autoscalerAnnotations = []string{clusterv1.AutoscalerMinSizeAnnotation, clusterv1.AutoscalerMaxSizeAnnotation}

// autoscalerKey is the first autoscaler annotation meta carries, or "".
func autoscalerKey(meta clusterv1.ObjectMeta) string {
	for _, k := range autoscalerAnnotations {
		if _, ok := meta.Annotations[k]; ok {
			return k
		}
	}
	return ""
}

// autoscalerConflicts refuses a MachineDeployment topology that sets
// replicas while its metadata, or that of its class in cc (nil when the
// class is unknown), hands its size to the cluster autoscaler: the topology
// and the autoscaler would keep setting the replicas against each other.
// MachinePools are not checked, as upstream does not check them.
func autoscalerConflicts(cluster *clusterv1.Cluster, cc *clusterv1.ClusterClass) field.ErrorList {
	var errs field.ErrorList
	for _, md := range cluster.Spec.Topology.Workers.MachineDeployments {
		if md.Replicas == nil {
			continue
		}
		path := topologyPath.Child("workers", "machineDeployments").Key(md.Name).Child("replicas")
		if k := autoscalerKey(md.Metadata); k != "" {
			errs = append(errs, field.Invalid(path, *md.Replicas, fmt.Sprintf(
				"cannot be set while the topology's metadata carries the annotation %s: the cluster autoscaler sets the replicas; remove replicas, or the autoscaler annotations", k)))
		}
		if cc == nil {
			continue
		}
		for _, c := range cc.Spec.Workers.MachineDeployments {
			if c.Class != md.Class {
				continue
			}
			if k := autoscalerKey(c.Metadata); k != "" {
				errs = append(errs, field.Invalid(path, *md.Replicas, fmt.Sprintf(
					"cannot be set: machineDeployments class %q of ClusterClass %s/%s carries the annotation %s, so the cluster autoscaler sets the replicas; remove replicas, or the annotation from the class",
					md.Class, cc.Namespace, cc.Name, k)))
			}
		}
	}
	return errs
}

// autoscalerInUse refuses a class whose MachineDeployment class carries an
// autoscaler annotation while Clusters of the class set the replicas of a
// MachineDeployment of that class; the error names the Clusters.
func autoscalerInUse(cc *clusterv1.ClusterClass, clusters []clusterv1.Cluster) field.ErrorList {
	var errs field.ErrorList
	for _, c := range cc.Spec.Workers.MachineDeployments {
		k := autoscalerKey(c.Metadata)
		if k == "" {
			continue
		}
		users := usersOf(clusters, func(t *clusterv1.Topology) bool {
			for _, md := range t.Workers.MachineDeployments {
				if md.Class == c.Class && md.Replicas != nil {
					return true
				}
			}
			return false
		})
		if len(users) > 0 {
			errs = append(errs, field.Forbidden(field.NewPath("spec", "workers", "machineDeployments").Key(c.Class).Child("metadata", "annotations").Key(k),
				fmt.Sprintf("cannot be set while Cluster(s) %s set the replicas of a MachineDeployment of this class: remove replicas from those topologies first (the autoscaler and the topology would fight over them)", clusterNames(users))))
		}
	}
	return errs
}

// healthChecksInUse refuses removing, from a class, a health check that a
// Cluster of the class turns on without giving checks of its own: the
// Cluster would lose its MachineHealthCheck without asking. Changing a
// health check is allowed (its Clusters follow the class).
func healthChecksInUse(old, cc *clusterv1.ClusterClass, clusters []clusterv1.Cluster) field.ErrorList {
	var errs field.ErrorList
	if old.Spec.ControlPlane.HealthCheck.IsDefined() && !cc.Spec.ControlPlane.HealthCheck.IsDefined() {
		users := usersOf(clusters, func(t *clusterv1.Topology) bool {
			return ptrTrue(t.ControlPlane.HealthCheck.Enabled) && !t.ControlPlane.HealthCheck.IsDefined()
		})
		if len(users) > 0 {
			errs = append(errs, field.Forbidden(field.NewPath("spec", "controlPlane", "healthCheck"), fmt.Sprintf(
				"cannot be removed: Cluster(s) %s turn the control plane health check on (controlPlane.healthCheck.enabled) without checks of their own; give those Clusters their own checks or turn it off first, or keep it",
				clusterNames(users))))
		}
	}
	for _, c := range cc.Spec.Workers.MachineDeployments {
		var before *clusterv1.MachineDeploymentClass
		for i := range old.Spec.Workers.MachineDeployments {
			if old.Spec.Workers.MachineDeployments[i].Class == c.Class {
				before = &old.Spec.Workers.MachineDeployments[i]
			}
		}
		if before == nil || !before.HealthCheck.IsDefined() || c.HealthCheck.IsDefined() {
			continue
		}
		users := usersOf(clusters, func(t *clusterv1.Topology) bool {
			for _, md := range t.Workers.MachineDeployments {
				if md.Class == c.Class && ptrTrue(md.HealthCheck.Enabled) && !md.HealthCheck.IsDefined() {
					return true
				}
			}
			return false
		})
		if len(users) > 0 {
			errs = append(errs, field.Forbidden(field.NewPath("spec", "workers", "machineDeployments").Key(c.Class).Child("healthCheck"), fmt.Sprintf(
				"cannot be removed: Cluster(s) %s turn it on (healthCheck.enabled) for MachineDeployments of this class without checks of their own; give those topologies their own checks or turn it off first, or keep it",
				clusterNames(users))))
		}
	}
	return errs
}

// usersOf is the Clusters whose topology uses says yes to.
func usersOf(clusters []clusterv1.Cluster, uses func(*clusterv1.Topology) bool) []*clusterv1.Cluster {
	var out []*clusterv1.Cluster
	for i := range clusters {
		if uses(&clusters[i].Spec.Topology) {
			out = append(out, &clusters[i])
		}
	}
	return out
}
