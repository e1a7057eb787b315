package pool

import (
	"testing"

	"k8s.io/utils/ptr"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

// TestRevision: the version and the bootstrap data decide an instance's
// revision, nothing else of the MachinePool does.
func TestRevision(t *testing.T) {
	mp := &clusterv1.MachinePool{}
	mp.Spec.Template.Spec.Version = "v1.34.0"
	mp.Spec.Template.Spec.Bootstrap.DataSecretName = ptr.To("data-1")
	base := Revision(mp)

	other := mp.DeepCopy()
	other.Spec.Replicas = ptr.To[int32](5)
	other.Spec.Template.Labels = map[string]string{"a": "b"}
	if Revision(other) != base {
		t.Error("replicas or labels changed the revision")
	}
	other = mp.DeepCopy()
	other.Spec.Template.Spec.Version = "v1.35.0"
	if Revision(other) == base {
		t.Error("a new version kept the revision")
	}
	other = mp.DeepCopy()
	other.Spec.Template.Spec.Bootstrap.DataSecretName = ptr.To("data-2")
	if Revision(other) == base {
		t.Error("new bootstrap data kept the revision")
	}
}
