package webhook

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/contract"
	"capstan.dev/capstan/internal/plan"
	"capstan.dev/capstan/internal/topology/desired"
)

// upgradeState is where a topology Cluster's parts are, as the upgrade
// decision sees them: what the webhook needs to tell whether the previous
// version change is done.
type upgradeState struct {
	ControlPlane plan.ControlPlaneVersionState
	// ControlPlaneName is the control plane object's name (for messages).
	ControlPlaneName   string
	MachineDeployments []plan.WorkerVersionState
	MachinePools       []plan.WorkerVersionState
}

// upgradeUnderWay lists what still runs another version than previous, the
// topology version being replaced: a control plane that does not exist, is
// asked for another version, makes its first Machines or has Machines of
// another version; MachineDeployments and MachinePools asked for another
// version or whose Machines are not all at theirs. Empty when the Cluster
// stands entirely at previous and a new version may be set.
func upgradeUnderWay(previous string, st upgradeState) []string {
	var out []string
	cp := st.ControlPlane
	name := "the control plane"
	if cp.Kind != "" {
		name = fmt.Sprintf("the control plane (%s %s)", cp.Kind, st.ControlPlaneName)
	}
	switch {
	case !cp.Exists:
		out = append(out, "the control plane does not exist yet")
	case cp.Version != previous:
		out = append(out, fmt.Sprintf("%s is at %s, not yet at %s", name, cp.Version, previous))
	case cp.Provisioning:
		out = append(out, name+" is still making its first Machines")
	case cp.Upgrading:
		out = append(out, fmt.Sprintf("%s still has Machines that are not at %s", name, previous))
	}
	behind := func(kind string, workers []plan.WorkerVersionState) {
		var names []string
		for _, w := range workers {
			if w.Version != previous || w.Upgrading {
				n := w.ObjectName
				if n == "" {
					n = w.Name
				}
				names = append(names, n)
			}
		}
		if len(names) > 0 {
			out = append(out, fmt.Sprintf("%s %s are not all at %s yet", kind, strings.Join(names, ", "), previous))
		}
	}
	behind("MachineDeployment(s)", st.MachineDeployments)
	behind("MachinePool(s)", st.MachinePools)
	return out
}

// upgradeRefusal is the refusal of a new version while upgradeUnderWay
// found the previous one still under way; nil when nothing waits.
func upgradeRefusal(value, previous string, waits []string) *field.Error {
	if len(waits) == 0 {
		return nil
	}
	return field.Invalid(topologyPath.Child("version"), value, fmt.Sprintf(
		"cannot be changed while the upgrade to %s is under way: %s; wait until the Cluster runs %s everywhere (its TopologyReconciled condition says what it waits for), or set the annotation %s to skip the version checks",
		previous, strings.Join(waits, "; "), previous, clusterv1.ClusterTopologyUnsafeUpdateVersionAnnotation))
}

// readUpgradeState reads the control plane, MachineDeployments and
// MachinePools the topology of cluster made.
func (s *Server) readUpgradeState(ctx context.Context, cluster *clusterv1.Cluster) (upgradeState, error) {
	var st upgradeState
	if ref := cluster.Spec.ControlPlaneRef; ref.IsDefined() {
		// Read live: the cache holds no informer for a provider's kind
		// until a controller asked for one, and a version change is rare.
		cp, err := (&contract.Resolver{Reader: s.live}).Get(ctx, s.live, ref, cluster.Namespace)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return st, fmt.Errorf("reading the control plane %s %s: %w", ref.Kind, ref.Name, err)
		default:
			st.ControlPlane = desired.ControlPlaneState(cp)
			st.ControlPlaneName = cp.GetName()
		}
	}
	reader := client.Reader(s.client)
	if s.opts.FilteredCache {
		reader = s.live
	}
	owned := []client.ListOption{client.InNamespace(cluster.Namespace),
		client.MatchingLabels{clusterv1.ClusterNameLabel: cluster.Name, clusterv1.ClusterTopologyOwnedLabel: ""}}
	mds := &clusterv1.MachineDeploymentList{}
	if err := reader.List(ctx, mds, owned...); err != nil {
		return st, fmt.Errorf("listing the Cluster's MachineDeployments: %w", err)
	}
	for _, md := range mds.Items {
		st.MachineDeployments = append(st.MachineDeployments, desired.ExistingWorker(
			md.Labels[clusterv1.ClusterTopologyMachineDeploymentNameLabel], md.Name, md.Spec.Template.Spec.Version, md.Status.Versions))
	}
	mps := &clusterv1.MachinePoolList{}
	if err := reader.List(ctx, mps, owned...); err != nil {
		return st, fmt.Errorf("listing the Cluster's MachinePools: %w", err)
	}
	for _, mp := range mps.Items {
		st.MachinePools = append(st.MachinePools, desired.ExistingWorker(
			mp.Labels[clusterv1.ClusterTopologyMachinePoolNameLabel], mp.Name, mp.Spec.Template.Spec.Version, mp.Status.Versions))
	}
	return st, nil
}
