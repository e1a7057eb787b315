package machinedeployment

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

// RollbackTemplate returns the Machine template of an earlier revision of
// md, to be written to md's spec.template; toRevision 0 means the revision
// before the current one. sets are MachineSets of md's namespace: those md
// does not control are ignored. Writing the template back makes the
// revision's MachineSet the up-to-date one again, and the controller rolls
// back to it like any other rollout.
func RollbackTemplate(md *clusterv1.MachineDeployment, sets []clusterv1.MachineSet, toRevision int64) (*clusterv1.MachineTemplateSpec, error) {
	var owned []*clusterv1.MachineSet
	for i := range sets {
		if isController(metav1.GetControllerOf(&sets[i]), md) && revisionOf(&sets[i]) > 0 {
			owned = append(owned, &sets[i])
		}
	}
	current := revisionOf(md)
	for _, ms := range owned {
		if TemplateUpToDate(&ms.Spec.Template, &md.Spec.Template) {
			current = max(current, revisionOf(ms))
		}
	}
	var target *clusterv1.MachineSet
	for _, ms := range owned {
		rev := revisionOf(ms)
		switch {
		case toRevision > 0 && rev == toRevision:
			target = ms
		case toRevision == 0 && rev < current && (target == nil || rev > revisionOf(target)):
			target = ms
		}
	}
	if target == nil {
		var revisions []int64
		for _, ms := range owned {
			revisions = append(revisions, revisionOf(ms))
		}
		slices.Sort(revisions)
		var kept []string
		for _, rev := range revisions {
			kept = append(kept, strconv.FormatInt(rev, 10))
		}
		if toRevision == 0 {
			return nil, fmt.Errorf("MachineDeployment %s has no revision before %d to roll back to (kept revisions: %s)", md.Name, current, listOrNone(kept))
		}
		return nil, fmt.Errorf("revision %d of MachineDeployment %s is not kept (kept revisions: %s)", toRevision, md.Name, listOrNone(kept))
	}
	if revisionOf(target) == current && TemplateUpToDate(&target.Spec.Template, &md.Spec.Template) {
		return nil, fmt.Errorf("MachineDeployment %s already runs revision %d", md.Name, current)
	}
	t := target.Spec.Template.DeepCopy()
	delete(t.Labels, clusterv1.MachineDeploymentUniqueLabel)
	if len(t.Labels) == 0 {
		t.Labels = nil
	}
	return t, nil
}

func listOrNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}
