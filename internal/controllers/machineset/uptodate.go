package machineset

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/contract"
	"capstan.dev/capstan/internal/plan"
)

// rolloutFields is a Machine spec with the fields that are propagated to
// existing Machines in place, or that never differ within a cluster, cleared:
// what is left needs new Machines when it changes.
func rolloutFields(spec *clusterv1.MachineSpec) *clusterv1.MachineSpec {
	s := spec.DeepCopy()
	s.ClusterName = ""
	s.Deletion = clusterv1.MachineDeletionSpec{}
	s.MinReadySeconds = nil
	s.ReadinessGates = nil
	s.Taints = nil
	return s
}

// templateDifferences says, one sentence per difference, why Machines made
// from current are not what desired asks for. Labels, annotations and the
// fields propagated in place never count. No sentences means up to date.
func templateDifferences(current, desired *clusterv1.MachineTemplateSpec) []string {
	c, d := rolloutFields(&current.Spec), rolloutFields(&desired.Spec)
	var diffs []string
	orNone := func(s string) string {
		if s == "" {
			return "unset"
		}
		return s
	}
	if c.Version != d.Version {
		diffs = append(diffs, fmt.Sprintf("Version %s, %s required", orNone(c.Version), orNone(d.Version)))
	}
	if !reflect.DeepEqual(c.Bootstrap, d.Bootstrap) {
		if c.Bootstrap.ConfigRef.IsDefined() {
			diffs = append(diffs, strings.TrimSuffix(c.Bootstrap.ConfigRef.Kind, contract.TemplateSuffix)+" is not up-to-date")
		} else {
			var have, want string
			if c.Bootstrap.DataSecretName != nil {
				have = *c.Bootstrap.DataSecretName
			}
			if d.Bootstrap.DataSecretName != nil {
				want = *d.Bootstrap.DataSecretName
			}
			diffs = append(diffs, fmt.Sprintf("spec.bootstrap.dataSecretName %s, %s required", orNone(have), orNone(want)))
		}
	}
	if c.InfrastructureRef != d.InfrastructureRef {
		diffs = append(diffs, strings.TrimSuffix(c.InfrastructureRef.Kind, contract.TemplateSuffix)+" is not up-to-date")
	}
	if c.FailureDomain != d.FailureDomain {
		diffs = append(diffs, fmt.Sprintf("Failure domain %s, %s required", orNone(c.FailureDomain), orNone(d.FailureDomain)))
	}
	// Whatever else differs is named by its field.
	for _, s := range []*clusterv1.MachineSpec{c, d} {
		s.Version, s.Bootstrap, s.InfrastructureRef, s.FailureDomain = "", clusterv1.Bootstrap{}, clusterv1.ContractVersionedObjectReference{}, ""
	}
	cm, dm := specMap(c), specMap(d)
	var fields []string
	for k := range cm {
		if !reflect.DeepEqual(cm[k], dm[k]) {
			fields = append(fields, k)
		}
	}
	for k := range dm {
		if _, ok := cm[k]; !ok {
			fields = append(fields, k)
		}
	}
	sort.Strings(fields)
	for _, f := range fields {
		diffs = append(diffs, fmt.Sprintf("spec.%s differs", f))
	}
	return diffs
}

func specMap(s *clusterv1.MachineSpec) map[string]any {
	raw, _ := json.Marshal(s)
	m := map[string]any{}
	_ = json.Unmarshal(raw, &m)
	return m
}

// rolloutAfterExpired is the sentence that makes a Machine out of date once
// its MachineDeployment's spec.rollout.after has passed.
const rolloutAfterExpired = "MachineDeployment spec.rollout.after expired"

// upToDate decides a Machine's UpToDate condition. A Machine of a standalone
// MachineSet (md nil) is up to date. A Machine of a MachineDeployment's set
// is when the set's template makes what the deployment's template asks for
// and, once the deployment's rollout.after has passed, the set was created
// after it. The set's creation decides, not the Machine's, because the
// MachineDeployment judges sets that way: a Machine that an outdated set made
// after rollout.after is replaced with its set, and judging it up to date
// would leave the rollout unsettled. recheck is how long until the answer
// changes by itself (rollout.after still ahead), or 0.
func upToDate(ms *clusterv1.MachineSet, md *clusterv1.MachineDeployment, now time.Time) (cond metav1.Condition, recheck time.Duration) {
	cond = metav1.Condition{Type: clusterv1.UpToDateCondition, Status: metav1.ConditionTrue, Reason: clusterv1.UpToDateReason}
	if md == nil {
		return cond, 0
	}
	diffs := templateDifferences(&ms.Spec.Template, &md.Spec.Template)
	if after := md.Spec.Rollout.After; !after.IsZero() {
		if now.Before(after.Time) {
			recheck = after.Sub(now)
		} else if plan.OutdatedByRolloutAfter(ms.CreationTimestamp.Time, after.Time, now) {
			diffs = append(diffs, rolloutAfterExpired)
		}
	}
	if len(diffs) > 0 {
		for i := range diffs {
			diffs[i] = "* " + diffs[i]
		}
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, clusterv1.NotUpToDateReason, strings.Join(diffs, "\n")
	}
	return cond, recheck
}
