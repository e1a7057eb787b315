package machinehealthcheck

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/conditions"
	"capstan.dev/capstan/internal/plan"
	"capstan.dev/capstan/internal/workload"
)

// Reasons on the conditions this controller writes.
const (
	// WaitingForRemediationReason: the Machine is unhealthy and waits for
	// its owner or an external controller to remediate it.
	WaitingForRemediationReason = "WaitingForRemediation"
	// RemediationTemplateNotFoundReason: spec.remediation.templateRef names
	// a template that cannot be read, so no Machine can be remediated.
	RemediationTemplateNotFoundReason = "RemediationTemplateNotFound"
	// NotCheckedReason: the targets could not be judged yet.
	NotCheckedReason = "NotChecked"
)

// ownedConditionTypes are the Machine conditions this controller writes.
var ownedConditionTypes = []string{
	clusterv1.HealthCheckSucceededCondition,
	clusterv1.OwnerRemediatedCondition,
	clusterv1.ExternallyRemediatedCondition,
}

// reconcileTargets lists the Machines the health check watches: those of
// its Cluster that its selector picks and that a MachineSet or the
// Cluster's control plane controls. Machines being deleted are left out.
func (r *Reconciler) reconcileTargets(ctx context.Context, s *scope) (time.Duration, error) {
	sel, err := metav1.LabelSelectorAsSelector(&s.mhc.Spec.Selector)
	if err != nil {
		s.notJudged = fmt.Sprintf("spec.selector is invalid: %v", err)
		return 0, nil
	}
	if sel.Empty() {
		s.notJudged = "spec.selector is empty: it must pick the Machines to check"
		return 0, nil
	}
	req, err := labels.NewRequirement(clusterv1.ClusterNameLabel, selection.Equals, []string{s.mhc.Spec.ClusterName})
	if err != nil {
		s.notJudged = fmt.Sprintf("spec.clusterName is invalid: %v", err)
		return 0, nil
	}
	list := &clusterv1.MachineList{}
	if err := r.Client.List(ctx, list, client.InNamespace(s.mhc.Namespace), client.MatchingLabelsSelector{Selector: sel.Add(*req)}); err != nil {
		return 0, err
	}
	for i := range list.Items {
		m := &list.Items[i]
		if m.Spec.ClusterName != s.mhc.Spec.ClusterName || !m.DeletionTimestamp.IsZero() || !remediableOwner(m, s.cluster) {
			continue
		}
		s.machines = append(s.machines, m)
	}
	slices.SortFunc(s.machines, func(a, b *clusterv1.Machine) int { return strings.Compare(a.Name, b.Name) })
	return 0, nil
}

// remediableOwner tells whether an owner that can replace the Machine
// controls it: a MachineSet or the Cluster's control plane.
func remediableOwner(m *clusterv1.Machine, cluster *clusterv1.Cluster) bool {
	ref := metav1.GetControllerOf(m)
	if ref == nil {
		return false
	}
	if ref.Kind == clusterv1.MachineSetKind && strings.HasPrefix(ref.APIVersion, clusterv1.GroupVersion.Group+"/") {
		return true
	}
	cp := cluster.Spec.ControlPlaneRef
	return cp.IsDefined() && ref.Kind == cp.Kind && ref.Name == cp.Name && strings.HasPrefix(ref.APIVersion, cp.APIGroup+"/")
}

// reconcileNodes reads the workload cluster's Nodes, once the Cluster's
// infrastructure is provisioned and its control plane initialized.
func (r *Reconciler) reconcileNodes(ctx context.Context, s *scope) (time.Duration, error) {
	if s.notJudged != "" {
		return 0, nil
	}
	if !s.cluster.DeletionTimestamp.IsZero() {
		s.notJudged = "Cluster " + s.cluster.Name + " is being deleted"
		return 0, nil
	}
	if !clusterInitialized(s.cluster) {
		s.notJudged = "Waiting for Cluster " + s.cluster.Name + "'s infrastructure to be provisioned and its control plane to be initialized"
		return 0, nil
	}
	if r.Workload == nil {
		s.notJudged = "No connection to workload clusters is configured"
		return 0, nil
	}
	key := client.ObjectKeyFromObject(s.cluster)
	if err := r.Workload.Watch(ctx, key, workload.WatchInput{
		Name:    "machinehealthcheck-nodes",
		Watcher: r.controller,
		Kind:    &corev1.Node{},
		Handler: handler.EnqueueRequestsFromMapFunc(r.nodeToChecks(s.cluster.Namespace)),
	}); err != nil {
		return r.unreachable(s, err), nil
	}
	c, err := r.Workload.GetClient(ctx, key)
	if err != nil {
		return r.unreachable(s, err), nil
	}
	nodes := &corev1.NodeList{}
	if err := c.List(ctx, nodes); err != nil {
		return r.unreachable(s, err), nil
	}
	s.nodes = map[string]*corev1.Node{}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		s.nodes["name/"+n.Name] = n
		if n.Spec.ProviderID != "" {
			s.nodes["id/"+n.Spec.ProviderID] = n
		}
	}
	return 0, nil
}

// unreachable records that Nodes could not be read; nothing is judged
// then, since every Node would look deleted. The connection is retried by
// the cache no sooner than every 10 s.
func (r *Reconciler) unreachable(s *scope, err error) time.Duration {
	s.notJudged = fmt.Sprintf("Cannot read the Nodes of Cluster %s: %v", s.cluster.Name, err)
	if errors.Is(err, workload.ErrClusterNotConnected) {
		return 15 * time.Second
	}
	return 5 * time.Second
}

func (s *scope) nodeOf(m *clusterv1.Machine) *corev1.Node {
	if m.Spec.ProviderID != "" {
		if n := s.nodes["id/"+m.Spec.ProviderID]; n != nil {
			return n
		}
	}
	if m.Status.NodeRef.IsDefined() {
		return s.nodes["name/"+m.Status.NodeRef.Name]
	}
	return nil
}

// checks turns the spec into the decision's input.
func checks(spec clusterv1.MachineHealthCheckSpec) (plan.HealthChecks, plan.RemediationTrigger) {
	var c plan.HealthChecks
	for _, u := range spec.Checks.UnhealthyNodeConditions {
		c.NodeConditions = append(c.NodeConditions, plan.HealthRule{Type: string(u.Type), Status: string(u.Status), Timeout: seconds(u.TimeoutSeconds)})
	}
	for _, u := range spec.Checks.UnhealthyMachineConditions {
		c.MachineConditions = append(c.MachineConditions, plan.HealthRule{Type: u.Type, Status: string(u.Status), Timeout: seconds(u.TimeoutSeconds)})
	}
	if spec.Checks.NodeStartupTimeoutSeconds != nil {
		c.NodeStartupTimeout = ptr.To(seconds(spec.Checks.NodeStartupTimeoutSeconds))
	}
	t := plan.RemediationTrigger{
		UnhealthyLessThanOrEqualTo: spec.Remediation.TriggerIf.UnhealthyLessThanOrEqualTo,
		UnhealthyInRange:           spec.Remediation.TriggerIf.UnhealthyInRange,
	}
	return c, t
}

func seconds(s *int32) time.Duration { return time.Duration(ptr.Deref(s, 0)) * time.Second }

// trueSince is when condition t turned True on obj; zero when it is not True.
func trueSince(obj interface{ GetConditions() []metav1.Condition }, t string) time.Time {
	if c := conditions.Get(obj, t); c != nil && c.Status == metav1.ConditionTrue {
		return c.LastTransitionTime.Time
	}
	return time.Time{}
}

func latest(ts ...time.Time) time.Time {
	var l time.Time
	for _, t := range ts {
		if t.After(l) {
			l = t
		}
	}
	return l
}

// target gathers what the decision needs of one Machine.
func (s *scope) target(m *clusterv1.Machine) plan.HealthTarget {
	machineStart := m.CreationTimestamp.Time
	if ptr.Deref(m.Status.Initialization.InfrastructureProvisioned, false) {
		machineStart = latest(machineStart, trueSince(m, clusterv1.InfrastructureReadyCondition))
	}
	t := plan.HealthTarget{
		Name: m.Name,
		StartedAt: latest(machineStart,
			trueSince(s.cluster, clusterv1.InfrastructureReadyCondition),
			trueSince(s.cluster, clusterv1.ClusterControlPlaneInitializedCondition)),
		HasNodeRef: m.Status.NodeRef.IsDefined(),
	}
	_, t.RemediateAnnotation = m.Annotations[clusterv1.RemediateMachineAnnotation]
	if node := s.nodeOf(m); node != nil {
		t.NodeFound = true
		for _, c := range node.Status.Conditions {
			t.NodeConditions = append(t.NodeConditions, plan.ObservedCondition{Type: string(c.Type), Status: string(c.Status), LastTransitionTime: c.LastTransitionTime.Time})
		}
	}
	for _, c := range m.Status.Conditions {
		t.MachineConditions = append(t.MachineConditions, plan.ObservedCondition{Type: c.Type, Status: string(c.Status), LastTransitionTime: c.LastTransitionTime.Time})
	}
	return t
}

// reconcileHealth judges the targets, marks them, and asks to be woken
// exactly when the next pending timeout fires.
func (r *Reconciler) reconcileHealth(ctx context.Context, s *scope) (time.Duration, error) {
	if s.notJudged != "" {
		return 0, nil
	}
	in := plan.HealthInput{Now: s.now}
	in.Checks, in.Trigger = checks(s.mhc.Spec)
	for _, m := range s.machines {
		in.Targets = append(in.Targets, s.target(m))
	}
	d := plan.DecideHealth(in)
	s.decision = &d
	var errs []error
	for i, m := range s.machines {
		if err := r.mark(ctx, s, m, d.Targets[i], d.ShortCircuited); err != nil {
			errs = append(errs, err)
		}
	}
	return d.RequeueAfter(s.now), errors.Join(errs...)
}

// mark writes the verdict on one Machine and starts its remediation.
func (r *Reconciler) mark(ctx context.Context, s *scope, m *clusterv1.Machine, v plan.TargetHealth, shortCircuited bool) error {
	want := map[string]*metav1.Condition{}
	for _, t := range ownedConditionTypes {
		want[t] = meta.FindStatusCondition(m.Status.Conditions, t)
	}
	// A remediation condition the owner (or the external controller) has
	// moved on from waiting is theirs now: it is neither re-sent nor removed.
	leave := map[string]bool{}
	for _, t := range []string{clusterv1.OwnerRemediatedCondition, clusterv1.ExternallyRemediatedCondition} {
		if c := want[t]; c != nil && c.Reason != WaitingForRemediationReason {
			leave[t] = true
		}
	}
	external := s.mhc.Spec.Remediation.TemplateRef.IsDefined()
	// Events that announce a condition change are recorded once the change
	// is written: a reconcile from a stale read, whose write is refused,
	// must not announce it a second time.
	var announce []func()
	later := func(reason, action, note string, args ...any) {
		announce = append(announce, func() { r.event(m, s.mhc, corev1.EventTypeWarning, reason, action, note, args...) })
	}
	apply := func() error {
		if err := r.applyConditions(ctx, s, m, want, leave); err != nil {
			return err
		}
		for _, a := range announce {
			a()
		}
		return nil
	}
	if v.Healthy {
		want[clusterv1.HealthCheckSucceededCondition] = &metav1.Condition{Type: clusterv1.HealthCheckSucceededCondition, Status: metav1.ConditionTrue, Reason: plan.HealthyReason}
		// A request nobody acted on yet is withdrawn.
		for _, t := range []string{clusterv1.OwnerRemediatedCondition, clusterv1.ExternallyRemediatedCondition} {
			if c := want[t]; c != nil && c.Status == metav1.ConditionFalse && c.Reason == WaitingForRemediationReason {
				want[t] = nil
				if t == clusterv1.ExternallyRemediatedCondition {
					if err := r.deleteExternal(ctx, s, m); err != nil {
						return err
					}
				}
				announce = append(announce, func() {
					r.event(m, s.mhc, corev1.EventTypeNormal, "RemediationWithdrawn", "Check",
						"Machine %s is healthy again; its remediation request is withdrawn", m.Name)
				})
			}
		}
		return apply()
	}
	msg := v.Message
	if v.FailedCondition != "" {
		msg = fmt.Sprintf("%s (condition %s)", msg, v.FailedCondition)
	}
	why := v.Reason + ": " + msg
	want[clusterv1.HealthCheckSucceededCondition] = &metav1.Condition{Type: clusterv1.HealthCheckSucceededCondition, Status: metav1.ConditionFalse, Reason: v.Reason, Message: msg}
	switch {
	case shortCircuited:
		if c := meta.FindStatusCondition(m.Status.Conditions, clusterv1.HealthCheckSucceededCondition); c == nil || c.Status != metav1.ConditionFalse {
			later("RemediationRestricted", "Check",
				"Machine %s is unhealthy (%s) but is not remediated: %s", m.Name, why, s.decision.Message)
		}
	case external:
		if want[clusterv1.ExternallyRemediatedCondition] == nil {
			if err := r.createExternal(ctx, s, m); err != nil {
				r.event(s.mhc, m, corev1.EventTypeWarning, "RemediationFailed", "Remediate",
					"Cannot create the remediation request for Machine %s: %v", m.Name, err)
				return err
			}
			want[clusterv1.ExternallyRemediatedCondition] = &metav1.Condition{Type: clusterv1.ExternallyRemediatedCondition, Status: metav1.ConditionFalse, Reason: WaitingForRemediationReason,
				Message: fmt.Sprintf("Waiting for %s %s to remediate the Machine", externalKind(s.mhc.Spec.Remediation.TemplateRef.Kind), m.Name)}
			later("MachineMarkedUnhealthy", "Remediate",
				"Machine %s is unhealthy (%s); created %s %s to remediate it", m.Name, why, externalKind(s.mhc.Spec.Remediation.TemplateRef.Kind), m.Name)
		}
	default:
		// Once asked, the owner carries the condition on; never overwrite
		// its progress.
		if want[clusterv1.OwnerRemediatedCondition] == nil {
			want[clusterv1.OwnerRemediatedCondition] = &metav1.Condition{Type: clusterv1.OwnerRemediatedCondition, Status: metav1.ConditionFalse, Reason: WaitingForRemediationReason,
				Message: "Waiting for the owner of the Machine to remediate it"}
			later("MachineMarkedUnhealthy", "Remediate",
				"Machine %s is unhealthy (%s); its owner is asked to remediate it", m.Name, why)
		}
	}
	return apply()
}

// applyConditions server-side applies exactly the owned conditions in want
// (a nil entry removes that condition, a leave entry is not touched) under
// FieldManager, and only when something differs from what the Machine has:
// other controllers own the Machine's other conditions and status fields.
// An apply that carries or drops a remediation request is made conditional
// on the Machine's resourceVersion, so that a stale read can never undo
// what the owner did to it in between.
func (r *Reconciler) applyConditions(ctx context.Context, s *scope, m *clusterv1.Machine, want map[string]*metav1.Condition, leave map[string]bool) error {
	changed, lock := false, false
	var list []any
	for _, t := range ownedConditionTypes {
		if leave[t] {
			continue
		}
		have := meta.FindStatusCondition(m.Status.Conditions, t)
		w := want[t]
		if t != clusterv1.HealthCheckSucceededCondition && (have != nil || w != nil) {
			lock = true
		}
		if w == nil {
			changed = changed || have != nil
			continue
		}
		c := *w
		c.ObservedGeneration = m.Generation
		c.LastTransitionTime = metav1.NewTime(s.now)
		if have != nil && have.Status == c.Status {
			c.LastTransitionTime = have.LastTransitionTime
		}
		if have == nil || have.Status != c.Status || have.Reason != c.Reason || have.Message != c.Message || have.ObservedGeneration != c.ObservedGeneration {
			changed = true
		}
		list = append(list, map[string]any{
			"type": c.Type, "status": string(c.Status), "reason": c.Reason, "message": c.Message,
			"observedGeneration": c.ObservedGeneration, "lastTransitionTime": c.LastTransitionTime.UTC().Format(time.RFC3339),
		})
	}
	if !changed {
		return nil
	}
	if list == nil {
		list = []any{}
	}
	apply := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": clusterv1.GroupVersion.String(), "kind": "Machine",
		"metadata": map[string]any{"name": m.Name, "namespace": m.Namespace},
		"status":   map[string]any{"conditions": list},
	}}
	if lock {
		apply.SetResourceVersion(m.ResourceVersion)
	}
	if err := r.Client.Status().Patch(ctx, apply, client.Apply, client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("applying health conditions of Machine %s: %w", m.Name, err)
	}
	return nil
}

// externalKind is the kind a remediation template makes.
func externalKind(templateKind string) string { return strings.TrimSuffix(templateKind, "Template") }

// createExternal creates the external remediation request for m from the
// health check's template: an object of the template's kind without the
// Template suffix, named after the Machine, owned by it.
func (r *Reconciler) createExternal(ctx context.Context, s *scope, m *clusterv1.Machine) error {
	ref := s.mhc.Spec.Remediation.TemplateRef
	tmpl := &unstructured.Unstructured{}
	tmpl.SetGroupVersionKind(ref.GroupVersionKind())
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: s.mhc.Namespace, Name: ref.Name}, tmpl); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("remediation template %s %s does not exist", ref.Kind, ref.Name)
		}
		return err
	}
	spec, found, err := unstructured.NestedMap(tmpl.Object, "spec", "template", "spec")
	if err != nil {
		return fmt.Errorf("remediation template %s %s: spec.template.spec: %w", ref.Kind, ref.Name, err)
	}
	if !found {
		spec = map[string]any{}
	}
	obj := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	obj.SetAPIVersion(ref.APIVersion)
	obj.SetKind(externalKind(ref.Kind))
	obj.SetNamespace(m.Namespace)
	obj.SetName(m.Name)
	tmeta, _, _ := unstructured.NestedMap(tmpl.Object, "spec", "template", "metadata")
	objLabels := map[string]string{}
	if l, ok := tmeta["labels"].(map[string]any); ok {
		for k, v := range l {
			objLabels[k] = fmt.Sprint(v)
		}
	}
	objLabels[clusterv1.ClusterNameLabel] = m.Spec.ClusterName
	obj.SetLabels(objLabels)
	if a, ok := tmeta["annotations"].(map[string]any); ok {
		ann := map[string]string{}
		for k, v := range a {
			ann[k] = fmt.Sprint(v)
		}
		obj.SetAnnotations(ann)
	}
	obj.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Machine", Name: m.Name, UID: m.UID}})
	if err := r.Client.Create(ctx, obj, client.FieldOwner(FieldManager)); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// deleteExternal removes the remediation request of a Machine that became
// healthy before anyone acted on it.
func (r *Reconciler) deleteExternal(ctx context.Context, s *scope, m *clusterv1.Machine) error {
	ref := s.mhc.Spec.Remediation.TemplateRef
	if !ref.IsDefined() {
		return nil
	}
	obj := &unstructured.Unstructured{}
	obj.SetAPIVersion(ref.APIVersion)
	obj.SetKind(externalKind(ref.Kind))
	obj.SetNamespace(m.Namespace)
	obj.SetName(m.Name)
	return client.IgnoreNotFound(r.Client.Delete(ctx, obj))
}

func (r *Reconciler) event(regarding, related client.Object, eventType, reason, action, note string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(regarding, related, eventType, reason, action, note, args...)
	}
}

// summarize writes the health check's status from what the reconcile saw.
func (r *Reconciler) summarize(s *scope) {
	if !s.mhc.DeletionTimestamp.IsZero() {
		return
	}
	s.mhc.Status.ObservedGeneration = s.mhc.Generation
	if s.paused {
		return
	}
	st := &s.mhc.Status
	st.Targets = nil
	for _, m := range s.machines {
		st.Targets = append(st.Targets, m.Name)
	}
	st.ExpectedMachines = ptr.To(int32(len(s.machines)))
	before := conditions.Get(s.mhc, clusterv1.RemediationAllowedCondition)
	var c metav1.Condition
	switch {
	case s.decision == nil:
		msg := s.notJudged
		if msg == "" {
			msg = "The Machines could not be checked"
		}
		c = metav1.Condition{Type: clusterv1.RemediationAllowedCondition, Status: metav1.ConditionUnknown, Reason: NotCheckedReason, Message: msg}
	default:
		d := s.decision
		st.CurrentHealthy = ptr.To(int32(d.Healthy()))
		st.RemediationsAllowed = ptr.To(int32(d.RemediationsAllowed))
		status := metav1.ConditionTrue
		if d.ShortCircuited {
			status = metav1.ConditionFalse
		}
		c = metav1.Condition{Type: clusterv1.RemediationAllowedCondition, Status: status, Reason: d.Reason, Message: d.Message}
		if d.ShortCircuited && (before == nil || before.Status != metav1.ConditionFalse || before.Message != d.Message) {
			r.event(s.mhc, nil, corev1.EventTypeWarning, d.Reason, "Remediate", "%s", d.Message)
		}
	}
	if s.templateMissing != "" {
		c = metav1.Condition{Type: clusterv1.RemediationAllowedCondition, Status: metav1.ConditionFalse, Reason: RemediationTemplateNotFoundReason, Message: s.templateMissing}
	}
	conditions.Set(s.mhc, c)
}

// templateRetry is how soon a health check whose remediation template is
// missing looks again: the user has to create it.
const templateRetry = 30 * time.Second

// checkRemediationTemplate makes sure spec.remediation.templateRef, when
// set, names a template that exists.
func (r *Reconciler) checkRemediationTemplate(ctx context.Context, s *scope) (time.Duration, error) {
	ref := s.mhc.Spec.Remediation.TemplateRef
	if !ref.IsDefined() {
		return 0, nil
	}
	tmpl := &unstructured.Unstructured{}
	tmpl.SetGroupVersionKind(ref.GroupVersionKind())
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: s.mhc.Namespace, Name: ref.Name}, tmpl)
	switch {
	case err == nil:
		return 0, nil
	case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
		s.templateMissing = fmt.Sprintf("remediation template %s %s does not exist in namespace %s: create it, or fix spec.remediation.templateRef", ref.Kind, ref.Name, s.mhc.Namespace)
		return templateRetry, nil
	default:
		return 0, err
	}
}
