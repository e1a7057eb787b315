package clustertopology

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/conditions"
	"capstan.dev/capstan/internal/contract"
	"capstan.dev/capstan/internal/index"
	"capstan.dev/capstan/internal/topology"
	"capstan.dev/capstan/internal/topology/desired"
	"capstan.dev/capstan/internal/usererror"
)

// gather reads the ClusterClass, the templates it references and what
// exists of the topology.
func (r *Reconciler) gather(ctx context.Context, s *scope) (time.Duration, error) {
	c := s.cluster
	class, err := r.readClass(ctx, c)
	if err != nil {
		return 0, err
	}
	if class == nil {
		// A Cluster may come before its class; the class's creation wakes
		// it (classToClusters).
		s.notReady = fmt.Sprintf("ClusterClass %s (spec.topology.classRef) does not exist yet: create it, or point classRef at an existing one", c.GetClassKey())
		s.notReadyReason = clusterv1.ClusterTopologyReconciledClusterClassNotReconciledReason
		return 0, nil
	}
	s.class = class
	if why := classNotReconciled(class); why != "" {
		// The class's controller has yet to check what the class holds;
		// its status update wakes the Cluster.
		s.notReady, s.notReadyReason = why, clusterv1.ClusterTopologyReconciledClusterClassNotReconciledReason
		return 0, nil
	}
	if err := unsupported(class); err != nil {
		return 0, usererror.Mark(err)
	}
	templates, err := r.classTemplates(ctx, class)
	if err != nil {
		return 0, err
	}
	s.classTemplates = templates
	if err := r.readCurrent(ctx, s); err != nil {
		return 0, err
	}
	s.currentRead = true
	return 0, nil
}

// readClass reads the Cluster's ClusterClass; nil when it does not exist.
func (r *Reconciler) readClass(ctx context.Context, c *clusterv1.Cluster) (*clusterv1.ClusterClass, error) {
	class := &clusterv1.ClusterClass{}
	if err := r.Client.Get(ctx, c.GetClassKey(), class); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	return class, nil
}

// classNotReconciled says why the ClusterClass cannot be used yet; "" when
// it can.
func classNotReconciled(class *clusterv1.ClusterClass) string {
	if class.Generation != class.Status.ObservedGeneration {
		return fmt.Sprintf("ClusterClass %s is not reconciled yet: its status.observedGeneration is %d, its generation %d; if this lasts, look at the ClusterClass's conditions",
			class.Name, class.Status.ObservedGeneration, class.Generation)
	}
	if !conditions.IsTrue(class, clusterv1.ClusterClassVariablesReadyCondition) {
		msg := "not reported"
		if cond := conditions.Get(class, clusterv1.ClusterClassVariablesReadyCondition); cond != nil {
			msg = cond.Message
			if msg == "" {
				msg = string(cond.Status) + " (" + cond.Reason + ")"
			}
		}
		return fmt.Sprintf("ClusterClass %s is not reconciled: its %s condition is not True: %s", class.Name, clusterv1.ClusterClassVariablesReadyCondition, msg)
	}
	return ""
}

// unsupported refuses the parts of a ClusterClass that need Runtime SDK
// extensions, which Capstan does not run: applying the class without them
// would make objects other than the ones the class describes.
func unsupported(class *clusterv1.ClusterClass) error {
	var what []string
	for _, p := range class.Spec.Patches {
		if p.External != nil {
			what = append(what, fmt.Sprintf("patch %q is external (spec.patches[].external)", p.Name))
		}
	}
	if ext := class.Spec.Upgrade.External.GenerateUpgradePlanExtension; ext != "" {
		what = append(what, fmt.Sprintf("the upgrade plan comes from extension %q (spec.upgrade.external)", ext))
	}
	if len(what) == 0 {
		return nil
	}
	return fmt.Errorf("ClusterClass %s needs Runtime SDK extensions, which Capstan does not support: %s; use inline patches (spec.patches[].definitions) and the class's kubernetesVersions instead",
		class.Name, strings.Join(what, "; "))
}

// classTemplates reads the templates the class references, each in the
// version its provider's contract label names.
func (r *Reconciler) classTemplates(ctx context.Context, class *clusterv1.ClusterClass) (map[desired.TemplateKey]*unstructured.Unstructured, error) {
	out := map[desired.TemplateKey]*unstructured.Unstructured{}
	var errs []error
	for _, cr := range topology.ClassTemplateRefs(class) {
		field, ref := cr.Field, cr.Ref
		if _, err := schema.ParseGroupVersion(ref.APIVersion); err != nil {
			errs = append(errs, usererror.Mark(fmt.Errorf("ClusterClass %s %s: apiVersion %q: %w", class.Name, field, ref.APIVersion, err)))
			continue
		}
		key := desired.KeyOf(ref, class.Namespace)
		if _, done := out[key]; done {
			continue
		}
		obj, err := r.Resolver.Get(ctx, r.Client, clusterv1.ContractVersionedObjectReference{APIGroup: key.Group, Kind: ref.Kind, Name: ref.Name}, class.Namespace)
		if err != nil {
			if apierrors.IsNotFound(err) {
				err = usererror.Mark(fmt.Errorf("ClusterClass %s %s: %s %s does not exist: create it or fix the reference", class.Name, field, ref.Kind, ref.Name))
			} else {
				err = fmt.Errorf("ClusterClass %s %s: %w", class.Name, field, err)
			}
			errs = append(errs, err)
			continue
		}
		out[key] = obj
	}
	return out, errors.Join(errs...)
}

// readCurrent reads what exists of the topology: the objects the Cluster
// references, those they reference, and the topology-made
// MachineDeployments, MachinePools and MachineHealthChecks with theirs.
func (r *Reconciler) readCurrent(ctx context.Context, s *scope) error {
	c := s.cluster
	cur := &s.current
	var err error
	if cur.InfrastructureCluster, err = r.existing(ctx, c.Namespace, c.Spec.InfrastructureRef); err != nil {
		return err
	}
	if cur.ControlPlane, err = r.existing(ctx, c.Namespace, c.Spec.ControlPlaneRef); err != nil {
		return err
	}
	if cur.ControlPlane != nil {
		ref, err := contract.ControlPlaneMachineTemplateRef(cur.ControlPlane)
		if err != nil {
			return err
		}
		if cur.ControlPlaneMachineInfrastructure, err = r.existing(ctx, c.Namespace, ref); err != nil {
			return err
		}
	}

	checks := &clusterv1.MachineHealthCheckList{}
	if err := r.Client.List(ctx, checks, client.InNamespace(c.Namespace), ownedBy(c)); err != nil {
		return err
	}
	checkOf := map[string]*clusterv1.MachineHealthCheck{}
	for i := range checks.Items {
		checkOf[checks.Items[i].Name] = &checks.Items[i]
	}
	if cur.ControlPlane != nil {
		cur.ControlPlaneHealthCheck = checkOf[cur.ControlPlane.GetName()]
	}

	deployments := &clusterv1.MachineDeploymentList{}
	if err := r.Client.List(ctx, deployments, append(index.InCluster(c.Namespace, c.Name), ownedBy(c))...); err != nil {
		return err
	}
	cur.MachineDeployments = map[string]*desired.MachineDeployment{}
	for i := range deployments.Items {
		md := &deployments.Items[i]
		name := md.Labels[clusterv1.ClusterTopologyMachineDeploymentNameLabel]
		if name == "" {
			continue
		}
		state := &desired.MachineDeployment{Object: md, HealthCheck: checkOf[md.Name]}
		if state.Bootstrap, err = r.existing(ctx, c.Namespace, md.Spec.Template.Spec.Bootstrap.ConfigRef); err != nil {
			return err
		}
		if state.Infrastructure, err = r.existing(ctx, c.Namespace, md.Spec.Template.Spec.InfrastructureRef); err != nil {
			return err
		}
		cur.MachineDeployments[name] = state
	}

	pools := &clusterv1.MachinePoolList{}
	if err := r.Client.List(ctx, pools, append(index.InCluster(c.Namespace, c.Name), ownedBy(c))...); err != nil {
		return err
	}
	cur.MachinePools = map[string]*desired.MachinePool{}
	for i := range pools.Items {
		mp := &pools.Items[i]
		name := mp.Labels[clusterv1.ClusterTopologyMachinePoolNameLabel]
		if name == "" {
			continue
		}
		state := &desired.MachinePool{Object: mp}
		if state.Bootstrap, err = r.existing(ctx, c.Namespace, mp.Spec.Template.Spec.Bootstrap.ConfigRef); err != nil {
			return err
		}
		if state.Infrastructure, err = r.existing(ctx, c.Namespace, mp.Spec.Template.Spec.InfrastructureRef); err != nil {
			return err
		}
		cur.MachinePools[name] = state
	}
	return nil
}

// ownedBy selects the objects the Cluster's topology made.
func ownedBy(c *clusterv1.Cluster) client.MatchingLabels {
	return client.MatchingLabels{clusterv1.ClusterNameLabel: c.Name, clusterv1.ClusterTopologyOwnedLabel: ""}
}

// existing reads (and watches the kind of) the object ref names; nil when
// ref is empty or the object does not exist.
func (r *Reconciler) existing(ctx context.Context, namespace string, ref clusterv1.ContractVersionedObjectReference) (*unstructured.Unstructured, error) {
	if !ref.IsDefined() {
		return nil, nil
	}
	obj, err := r.Resolver.GetWatched(ctx, r.Client, r.providerWatches, ref, namespace)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return obj, err
}
