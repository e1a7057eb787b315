package plan

import (
	"sort"

	"k8s.io/apimachinery/pkg/util/version"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

// MachineVersion is the Kubernetes version a Machine runs: its Node's
// kubelet version once the Node reports one, else the version it was made
// with.
func MachineVersion(m *clusterv1.Machine) string {
	if m.Status.NodeInfo != nil && m.Status.NodeInfo.KubeletVersion != "" {
		return m.Status.NodeInfo.KubeletVersion
	}
	return m.Spec.Version
}

// CountVersions counts Machines by the Kubernetes version they run, for a
// status.versions: lowest version first, Machines without a version left
// out, nil when there is nothing to count.
func CountVersions(machines []*clusterv1.Machine) []clusterv1.StatusVersion {
	counts := map[string]int32{}
	for _, m := range machines {
		if v := MachineVersion(m); v != "" {
			counts[v]++
		}
	}
	return sortedVersions(counts)
}

// SumVersions adds up the version counts of several groups (the MachineSets
// of a MachineDeployment), in the same order as CountVersions.
func SumVersions(groups ...[]clusterv1.StatusVersion) []clusterv1.StatusVersion {
	counts := map[string]int32{}
	for _, g := range groups {
		for _, v := range g {
			counts[v.Version] += v.Replicas
		}
	}
	return sortedVersions(counts)
}

func sortedVersions(counts map[string]int32) []clusterv1.StatusVersion {
	if len(counts) == 0 {
		return nil
	}
	out := make([]clusterv1.StatusVersion, 0, len(counts))
	for v, n := range counts {
		out = append(out, clusterv1.StatusVersion{Version: v, Replicas: n})
	}
	sort.Slice(out, func(i, j int) bool { return versionLess(out[i].Version, out[j].Version) })
	return out
}

// versionLess orders versions semantically; one that does not parse comes
// after every one that does, and ties go by the text.
func versionLess(a, b string) bool {
	va, errA := version.ParseSemantic(a)
	vb, errB := version.ParseSemantic(b)
	switch {
	case errA == nil && errB == nil:
		if va.LessThan(vb) {
			return true
		}
		if vb.LessThan(va) {
			return false
		}
	case errA == nil:
		return true
	case errB == nil:
		return false
	}
	return a < b
}
