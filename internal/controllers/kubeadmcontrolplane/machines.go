package kubeadmcontrolplane

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"sort"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrl "sigs.k8s.io/controller-runtime/pkg/log"

	bootstrapv1 "capstan.dev/capstan/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "capstan.dev/capstan/api/controlplane/kubeadm/v1beta2"
	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/conditions"
	"capstan.dev/capstan/internal/contract"
	"capstan.dev/capstan/internal/plan"
)

// machineLabels are the labels of every Machine (and clone) of the control
// plane; status.selector selects them.
func machineLabels(kcp *controlplanev1.KubeadmControlPlane, clusterName string) map[string]string {
	l := maps.Clone(kcp.Spec.MachineTemplate.ObjectMeta.Labels)
	if l == nil {
		l = map[string]string{}
	}
	l[clusterv1.ClusterNameLabel] = clusterName
	l[clusterv1.MachineControlPlaneLabel] = ""
	l[clusterv1.MachineControlPlaneNameLabel] = kcp.Name
	return l
}

// readMachines lists the Machines this control plane controls, with their
// KubeadmConfigs and infrastructure objects.
func (r *Reconciler) readMachines(ctx context.Context, s *scope) error {
	list := &clusterv1.MachineList{}
	if err := r.Client.List(ctx, list, client.InNamespace(s.kcp.Namespace),
		client.MatchingLabels{clusterv1.MachineControlPlaneNameLabel: s.kcp.Name}); err != nil {
		return fmt.Errorf("listing Machines: %w", err)
	}
	var errs []error
	for i := range list.Items {
		m := &list.Items[i]
		if ref := metav1.GetControllerOf(m); ref == nil || ref.UID != s.kcp.UID {
			continue
		}
		ms := &machineState{machine: m}
		if ref := m.Spec.Bootstrap.ConfigRef; ref.Kind == "KubeadmConfig" {
			cfg := &bootstrapv1.KubeadmConfig{}
			switch err := r.Client.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: ref.Name}, cfg); {
			case err == nil:
				ms.config = cfg
			case !apierrors.IsNotFound(err):
				errs = append(errs, err)
			}
		}
		if ref := m.Spec.InfrastructureRef; ref.IsDefined() {
			if obj, err := r.Resolver.Get(ctx, r.Client, ref, m.Namespace); err == nil {
				ms.infra = obj
			} else if !apierrors.IsNotFound(err) {
				errs = append(errs, err)
			}
		}
		s.machines = append(s.machines, ms)
	}
	sort.Slice(s.machines, func(i, j int) bool { return s.machines[i].machine.Name < s.machines[j].machine.Name })
	s.machinesRead = len(errs) == 0
	for _, m := range s.machines {
		m.outdated = r.outdated(s, m)
	}
	return kerrors.NewAggregate(errs)
}

// outdated says why a Machine no longer matches the control plane's spec;
// empty when it does.
func (r *Reconciler) outdated(s *scope, m *machineState) []string {
	kcp := s.kcp
	var why []string
	if m.machine.Spec.Version != kcp.Spec.Version {
		why = append(why, fmt.Sprintf("version %s, want %s", m.machine.Spec.Version, kcp.Spec.Version))
	}
	ref := kcp.Spec.MachineTemplate.Spec.InfrastructureRef
	if m.infra != nil {
		a := m.infra.GetAnnotations()
		if a[clusterv1.TemplateClonedFromNameAnnotation] != ref.Name ||
			a[clusterv1.TemplateClonedFromGroupKindAnnotation] != ref.GroupKind().String() {
			why = append(why, fmt.Sprintf("infrastructure cloned from %s, want %s", a[clusterv1.TemplateClonedFromNameAnnotation], ref.Name))
		}
	}
	if got := m.machine.Annotations[controlplanev1.KubeadmClusterConfigurationAnnotation]; got != "" {
		if want, err := clusterConfigurationAnnotation(kcp); err == nil && !sameJSON(got, want) {
			why = append(why, "the kubeadm ClusterConfiguration changed")
		}
	}
	if m.config != nil && !reflect.DeepEqual(comparableSpec(m.config.Spec), comparableSpec(kcp.Spec.KubeadmConfigSpec)) {
		why = append(why, "the KubeadmConfig spec changed")
	}
	if days := kcp.Spec.Rollout.Before.CertificatesExpiryDays; days > 0 {
		if v, ok := m.machine.Annotations[clusterv1.MachineCertificatesExpiryDateAnnotation]; ok {
			if expiry, err := time.Parse(time.RFC3339, v); err == nil && !s.now.Add(time.Duration(days)*24*time.Hour).Before(expiry) {
				why = append(why, fmt.Sprintf("certificates expire on %s, within spec.rollout.before.certificatesExpiryDays (%d)", v, days))
			}
		}
	}
	if after := kcp.Spec.Rollout.After; !after.IsZero() {
		if !after.After(s.now) && m.machine.CreationTimestamp.Before(&after) {
			why = append(why, "spec.rollout.after "+after.UTC().Format("2006-01-02T15:04:05Z")+" has passed")
		} else if after.After(s.now) {
			s.rolloutDue = after.Time
		}
	}
	return why
}

// comparableSpec is the part of a KubeadmConfig spec every control-plane
// Machine shares: what differs between the first Machine (init) and the
// others (join) is left out, and so is the ClusterConfiguration, which only
// the init Machine carries and the Machine annotation records.
func comparableSpec(spec bootstrapv1.KubeadmConfigSpec) bootstrapv1.KubeadmConfigSpec {
	c := *spec.DeepCopy()
	c.ClusterConfiguration = bootstrapv1.ClusterConfiguration{}
	c.InitConfiguration = bootstrapv1.InitConfiguration{}
	c.JoinConfiguration = bootstrapv1.JoinConfiguration{}
	return c
}

func clusterConfigurationAnnotation(kcp *controlplanev1.KubeadmControlPlane) (string, error) {
	b, err := json.Marshal(kcp.Spec.KubeadmConfigSpec.ClusterConfiguration)
	return string(b), err
}

func sameJSON(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return a == b
	}
	return reflect.DeepEqual(x, y)
}

// createMachine makes one control-plane Machine: its infrastructure cloned
// from the template, a KubeadmConfig that runs kubeadm init (the first
// Machine) or joins as a control-plane member, and the Machine. When a step
// fails, what was already created is deleted again.
func (r *Reconciler) createMachine(ctx context.Context, s *scope, init bool, failureDomain string) (*clusterv1.Machine, error) {
	kcp := s.kcp
	if s.infraTmpl == nil {
		return nil, errors.Join(errors.New("the infrastructure template was not read"), s.templateErr)
	}
	name := kcp.Name + "-" + utilrand.String(5)
	owner := *metav1.NewControllerRef(kcp, controlplanev1.GroupVersion.WithKind("KubeadmControlPlane"))
	labels := machineLabels(kcp, s.cluster.Name)
	var created []client.Object
	undo := func(cause error) error {
		errs := []error{cause}
		for _, obj := range created {
			if err := r.Client.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("deleting %s after the failure: %w", obj.GetName(), err))
			}
		}
		return kerrors.NewAggregate(errs)
	}

	infra, err := contract.CloneTemplate(ctx, r.Resolver, r.writer(), s.infraTmpl, contract.Clone{
		Namespace: kcp.Namespace, Name: name, ClusterName: s.cluster.Name,
		Labels: labels, Annotations: kcp.Spec.MachineTemplate.ObjectMeta.Annotations, Owner: owner,
	})
	if err != nil {
		return nil, fmt.Errorf("cloning %s %s: %w", s.infraTmpl.GetKind(), s.infraTmpl.GetName(), err)
	}
	created = append(created, infra)

	spec := *kcp.Spec.KubeadmConfigSpec.DeepCopy()
	if init {
		spec.JoinConfiguration = bootstrapv1.JoinConfiguration{}
	} else {
		spec.InitConfiguration = bootstrapv1.InitConfiguration{}
		spec.ClusterConfiguration = bootstrapv1.ClusterConfiguration{}
		if spec.JoinConfiguration.ControlPlane == nil {
			spec.JoinConfiguration.ControlPlane = &bootstrapv1.JoinControlPlane{}
		}
	}
	cfg := &bootstrapv1.KubeadmConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: kcp.Namespace, Name: name, Labels: labels,
			Annotations: kcp.Spec.MachineTemplate.ObjectMeta.Annotations, OwnerReferences: []metav1.OwnerReference{owner}},
		Spec: spec,
	}
	if err := r.writer().Create(ctx, cfg); err != nil {
		return nil, undo(fmt.Errorf("creating KubeadmConfig %s: %w", name, err))
	}
	created = append(created, cfg)

	clusterCfg, err := clusterConfigurationAnnotation(kcp)
	if err != nil {
		return nil, undo(err)
	}
	annotations := maps.Clone(kcp.Spec.MachineTemplate.ObjectMeta.Annotations)
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[controlplanev1.KubeadmClusterConfigurationAnnotation] = clusterCfg
	annotations[controlplanev1.PreTerminateHookCleanupAnnotation] = ""
	// A replacement for a remediated Machine carries the remediation's
	// record, so that its own failure counts as a retry.
	inProgress, remediating := kcp.Annotations[controlplanev1.RemediationInProgressAnnotation]
	if remediating {
		annotations[controlplanev1.RemediationForAnnotation] = inProgress
	}
	tmpl := kcp.Spec.MachineTemplate.Spec
	m := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: kcp.Namespace, Name: name, Labels: labels, Annotations: annotations,
			OwnerReferences: []metav1.OwnerReference{owner}, Finalizers: []string{clusterv1.MachineFinalizer}},
		Spec: clusterv1.MachineSpec{
			ClusterName:       s.cluster.Name,
			Version:           kcp.Spec.Version,
			Bootstrap:         clusterv1.Bootstrap{ConfigRef: clusterv1.ContractVersionedObjectReference{APIGroup: bootstrapv1.GroupVersion.Group, Kind: "KubeadmConfig", Name: name}},
			InfrastructureRef: contract.ReferenceTo(infra),
			FailureDomain:     failureDomain,
			ReadinessGates:    tmpl.ReadinessGates,
			Deletion: clusterv1.MachineDeletionSpec{
				NodeDrainTimeoutSeconds:        tmpl.Deletion.NodeDrainTimeoutSeconds,
				NodeVolumeDetachTimeoutSeconds: tmpl.Deletion.NodeVolumeDetachTimeoutSeconds,
				NodeDeletionTimeoutSeconds:     tmpl.Deletion.NodeDeletionTimeoutSeconds,
			},
		},
	}
	if err := r.writer().Create(ctx, m); err != nil {
		return nil, undo(fmt.Errorf("creating Machine %s: %w", name, err))
	}
	if remediating {
		delete(kcp.Annotations, controlplanev1.RemediationInProgressAnnotation)
	}
	ctrl.FromContext(ctx).Info("Created control-plane Machine", "Machine", name, "init", init, "failureDomain", failureDomain)
	return m, nil
}

// planState turns what was read into the planner's input.
func planState(s *scope) plan.ControlPlaneState {
	in := plan.ControlPlaneState{
		Replicas:    int(ptr.Deref(s.kcp.Spec.Replicas, 1)),
		MaxSurge:    maxSurge(s.kcp),
		Initialized: s.initialized,
		EtcdMembers: -1,
		Remediation: remediationParams(s),
	}
	if s.etcd.err == nil && s.etcd.read {
		in.EtcdMembers = len(s.etcd.members)
	}
	for _, fd := range s.cluster.Status.FailureDomains {
		if ptr.Deref(fd.ControlPlane, false) {
			in.FailureDomains = append(in.FailureDomains, fd.Name)
		}
	}
	for _, m := range s.machines {
		member := s.etcd.member(m.nodeName())
		health := s.components[m.nodeName()]
		_, marked := m.machine.Annotations[clusterv1.DeleteMachineAnnotation]
		in.Machines = append(in.Machines, plan.ControlPlaneMachine{
			Name:              m.machine.Name,
			FailureDomain:     m.machine.Spec.FailureDomain,
			Created:           m.machine.CreationTimestamp.Time,
			UpToDate:          len(m.outdated) == 0,
			Deleting:          !m.machine.DeletionTimestamp.IsZero(),
			MarkedForDeletion: marked,
			EtcdMember:        member != nil,
			EtcdHealthy:       member != nil && member.healthy,
			ComponentsHealthy: health.healthy(),
			NeedsRemediation:  needsRemediation(m.machine),
			RemediationRetry:  remediationRetry(s, m.machine),
		})
	}
	return in
}

func maxSurge(kcp *controlplanev1.KubeadmControlPlane) int {
	v := kcp.Spec.Rollout.Strategy.RollingUpdate.MaxSurge
	if v == nil {
		return int(controlplanev1.DefaultMaxSurge)
	}
	return v.IntValue()
}

// reconcileScale asks the planner for the next step and takes it.
func (r *Reconciler) reconcileScale(ctx context.Context, s *scope) (time.Duration, error) {
	if s.certs == nil || !s.machinesRead {
		return 0, nil
	}
	s.action = plan.DecideControlPlane(planState(s))
	log := ctrl.FromContext(ctx)
	switch s.action.Kind {
	case plan.ControlPlaneInit, plan.ControlPlaneScaleUp:
		if s.templateErr != nil {
			s.actionErr = s.templateErr
			return 0, nil
		}
		m, err := r.createMachine(ctx, s, s.action.Kind == plan.ControlPlaneInit, s.action.FailureDomain)
		if err != nil {
			s.actionErr = err
			r.event(s.kcp, nil, "Warning", "FailedCreate", "Create", "Failed to create a control-plane Machine: %v", err)
			return 0, err
		}
		r.event(s.kcp, m, "Normal", "SuccessfulCreate", "Create", "Created Machine %s: %s", m.Name, s.action.Reason)
		s.machines = append(s.machines, &machineState{machine: m})
		return unsettledRetry, nil
	case plan.ControlPlaneScaleDown:
		for _, m := range s.machines {
			if m.machine.Name != s.action.Machine {
				continue
			}
			if err := r.Client.Delete(ctx, m.machine, client.Preconditions{UID: ptr.To(m.machine.UID)}); err != nil && !apierrors.IsNotFound(err) {
				s.actionErr = err
				return 0, err
			}
			log.Info("Deleting control-plane Machine", "Machine", m.machine.Name, "reason", s.action.Reason)
			r.event(s.kcp, m.machine, "Normal", "SuccessfulDelete", "Delete", "Deleting Machine %s: %s", m.machine.Name, s.action.Reason)
			m.machine.DeletionTimestamp = &metav1.Time{Time: s.now}
		}
		return unsettledRetry, nil
	case plan.ControlPlaneRemediate:
		for _, m := range s.machines {
			if m.machine.Name == s.action.Machine {
				if err := r.remediate(ctx, s, m); err != nil {
					s.actionErr = err
					return 0, err
				}
			}
		}
		return unsettledRetry, nil
	case plan.ControlPlaneWait:
		if !s.action.RetryAt.IsZero() {
			return max(s.action.RetryAt.Sub(s.now), time.Second), nil
		}
		return unsettledRetry, nil
	}
	if !s.rolloutDue.IsZero() {
		return min(s.rolloutDue.Sub(s.now), steadyRecheck), nil
	}
	return steadyRecheck, nil
}

// reconcileUpToDate tells each Machine whether it matches the control
// plane's spec, through its UpToDate condition (the owner's to write).
func (r *Reconciler) reconcileUpToDate(ctx context.Context, s *scope) (time.Duration, error) {
	var errs []error
	for _, m := range s.machines {
		cond := metav1.Condition{Type: clusterv1.UpToDateCondition, Status: metav1.ConditionTrue, Reason: clusterv1.UpToDateReason}
		if len(m.outdated) > 0 {
			cond = metav1.Condition{Type: clusterv1.UpToDateCondition, Status: metav1.ConditionFalse, Reason: clusterv1.NotUpToDateReason,
				Message: strings.Join(m.outdated, "; ")}
		}
		if err := conditions.Apply(ctx, r.Client, m.machine, clusterv1.GroupVersion.WithKind(clusterv1.MachineKind), cond, FieldManager, s.now); err != nil {
			errs = append(errs, fmt.Errorf("setting UpToDate on Machine %s: %w", m.machine.Name, err))
		}
	}
	return 0, kerrors.NewAggregate(errs)
}
