package kubeadmcontrolplane

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
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
	"capstan.dev/capstan/internal/machinecreate"
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
		if plan.OutdatedByRolloutAfter(m.machine.CreationTimestamp.Time, after.Time, s.now) {
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

// createMachine makes one control-plane Machine, then its KubeadmConfig
// (kubeadm init for the first Machine, a control-plane join for the others)
// and its infrastructure cloned from the template, both with the Machine as
// their controller.
func (r *Reconciler) createMachine(ctx context.Context, s *scope) (time.Duration, error) {
	init, failureDomain := s.action.Kind == plan.ControlPlaneInit, s.action.FailureDomain
	ctx = ctrl.IntoContext(ctx, ctrl.FromContext(ctx).WithValues("init", init, "failureDomain", failureDomain))
	created, err := r.creator().Create(ctx, 1, func() (*clusterv1.Machine, error) { return newMachine(s, failureDomain) }, r.makers(s, init))
	var related client.Object
	for _, m := range created.Machines {
		// The remediation's record went onto the new Machine.
		delete(s.kcp.Annotations, controlplanev1.RemediationInProgressAnnotation)
		r.event(s.kcp, m, "Normal", "SuccessfulCreate", "Create", "Created Machine %s: %s", m.Name, s.action.Reason)
		s.machines = append(s.machines, &machineState{machine: m})
		related = m
	}
	// A failed object does not undo the Machine: the repair creates what is
	// missing on the next reconcile, and deleting a control-plane Machine
	// would have to go through the etcd member removal and pre-terminate
	// hooks for nothing.
	if failed := cmp.Or(created.MachineErr, created.CacheErr, created.ObjectsErr); failed != nil {
		s.actionErr = failed
		r.event(s.kcp, related, "Warning", "FailedCreate", "Create", "Failed to create a control-plane Machine: %v", failed)
	}
	if err != nil {
		return 0, err
	}
	return unsettledRetry, nil
}

// newMachine is a new control-plane Machine in failureDomain, but for its
// references, which the creator sets.
func newMachine(s *scope, failureDomain string) (*clusterv1.Machine, error) {
	kcp := s.kcp
	if s.infraTmpl == nil {
		return nil, errors.Join(errors.New("the infrastructure template was not read"), s.templateErr)
	}
	name := kcp.Name + "-" + utilrand.String(5)
	clusterCfg, err := clusterConfigurationAnnotation(kcp)
	if err != nil {
		return nil, err
	}
	annotations := maps.Clone(kcp.Spec.MachineTemplate.ObjectMeta.Annotations)
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[controlplanev1.KubeadmClusterConfigurationAnnotation] = clusterCfg
	annotations[controlplanev1.PreTerminateHookCleanupAnnotation] = ""
	// A replacement for a remediated Machine carries the remediation's
	// record, so that its own failure counts as a retry.
	if inProgress, remediating := kcp.Annotations[controlplanev1.RemediationInProgressAnnotation]; remediating {
		annotations[controlplanev1.RemediationForAnnotation] = inProgress
	}
	tmpl := kcp.Spec.MachineTemplate.Spec
	return &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: kcp.Namespace, Name: name, Labels: machineLabels(kcp, s.cluster.Name), Annotations: annotations,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(kcp, controlplanev1.GroupVersion.WithKind("KubeadmControlPlane"))},
			Finalizers:      []string{clusterv1.MachineFinalizer}},
		Spec: clusterv1.MachineSpec{
			ClusterName:    s.cluster.Name,
			Version:        kcp.Spec.Version,
			FailureDomain:  failureDomain,
			ReadinessGates: tmpl.ReadinessGates,
			Taints:         slices.Clone(tmpl.Taints),
			Deletion: clusterv1.MachineDeletionSpec{
				NodeDrainTimeoutSeconds:        tmpl.Deletion.NodeDrainTimeoutSeconds,
				NodeVolumeDetachTimeoutSeconds: tmpl.Deletion.NodeVolumeDetachTimeoutSeconds,
				NodeDeletionTimeoutSeconds:     tmpl.Deletion.NodeDeletionTimeoutSeconds,
			},
		},
	}, nil
}

// creator creates the control plane's Machines and their objects, Machines
// first; the next reconcile must see both, or it would create another
// Machine or take the objects for missing.
func (r *Reconciler) creator() *machinecreate.Creator {
	return &machinecreate.Creator{Writer: r.writer(), FieldManager: FieldManager, Machines: r.Client, Objects: r.Client}
}

// makers make a control-plane Machine's KubeadmConfig (for kubeadm init
// when init is set) and clone its infrastructure template.
func (r *Reconciler) makers(s *scope, init bool) machinecreate.Makers {
	makers := machinecreate.Makers{Bootstrap: kubeadmConfigs{writer: r.writer(), kcp: s.kcp, clusterName: s.cluster.Name, init: init}}
	if s.infraTmpl != nil {
		makers.Infrastructure = machinecreate.TemplateClone{Resolver: r.Resolver, Writer: r.writer(), Template: s.infraTmpl,
			Labels: machineLabels(s.kcp, s.cluster.Name), Annotations: s.kcp.Spec.MachineTemplate.ObjectMeta.Annotations}
	}
	return makers
}

// kubeadmConfigs makes the KubeadmConfigs of a control plane's Machines:
// its KubeadmConfigSpec reduced to kubeadm init or to a control-plane join.
type kubeadmConfigs struct {
	writer      client.Client
	kcp         *controlplanev1.KubeadmControlPlane
	clusterName string
	init        bool
}

// Reference names the KubeadmConfig of a control-plane Machine, which has
// the Machine's name.
func (k kubeadmConfigs) Reference(machineName string) clusterv1.ContractVersionedObjectReference {
	return clusterv1.ContractVersionedObjectReference{APIGroup: bootstrapv1.GroupVersion.Group, Kind: "KubeadmConfig", Name: machineName}
}

// Make creates the KubeadmConfig of Machine m. One that already exists
// counts as created (an earlier attempt made it).
func (k kubeadmConfigs) Make(ctx context.Context, m *clusterv1.Machine) (client.Object, error) {
	spec := *k.kcp.Spec.KubeadmConfigSpec.DeepCopy()
	if k.init {
		spec.JoinConfiguration = bootstrapv1.JoinConfiguration{}
	} else {
		spec.InitConfiguration = bootstrapv1.InitConfiguration{}
		spec.ClusterConfiguration = bootstrapv1.ClusterConfiguration{}
		if spec.JoinConfiguration.ControlPlane == nil {
			spec.JoinConfiguration.ControlPlane = &bootstrapv1.JoinControlPlane{}
		}
	}
	cfg := &bootstrapv1.KubeadmConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: m.Namespace, Name: m.Name, Labels: machineLabels(k.kcp, k.clusterName),
			Annotations: k.kcp.Spec.MachineTemplate.ObjectMeta.Annotations, OwnerReferences: []metav1.OwnerReference{contract.MachineOwner(m)}},
		Spec: spec,
	}
	if err := k.writer.Create(ctx, cfg); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("creating KubeadmConfig %s for Machine %s: %w", m.Name, m.Name, err)
	}
	return cfg, nil
}

// repairMachines creates the KubeadmConfig and infrastructure object of
// the control plane's Machines that were never created: a manager stopped
// between creating a Machine and its objects, or a create failed.
// plan.MachineObjects says which objects qualify. The KubeadmConfig runs
// kubeadm init only for a Machine that is the control plane's only one
// while the control plane was never initialized, which is the one case the
// planner creates an init Machine in; every other Machine joins.
func (r *Reconciler) repairMachines(ctx context.Context, s *scope) error {
	owned := make([]machinecreate.Owned, len(s.machines))
	read := make(readObjects, len(s.machines))
	for i, ms := range s.machines {
		owned[i] = machinecreate.Owned{Machine: ms.machine}
		read[ms.machine] = ms
	}
	init := len(s.machines) == 1 && !s.initialized && !ptrTrue(s.kcp.Status.Initialization.ControlPlaneInitialized)
	repaired, err := r.creator().Repair(ctx, owned, r.makers(s, init), read)
	for _, f := range repaired.Failed {
		r.event(s.kcp, f.Machine, "Warning", "FailedCreate", "Create", "Failed to create the missing objects of Machine %s: %v", f.Machine.Name, f.Err)
	}
	return err
}

// readObjects finds a Machine's objects among those readMachines read.
type readObjects map[*clusterv1.Machine]*machineState

func (read readObjects) Exists(_ context.Context, m *clusterv1.Machine, slot plan.MachineObjectSlot, _ clusterv1.ContractVersionedObjectReference) (bool, error) {
	ms := read[m]
	if slot == plan.BootstrapObject {
		return ms.config != nil, nil
	}
	return ms.infra != nil, nil
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

// reconcileScale completes Machines that miss their objects, then asks the
// planner for the next step and takes it.
func (r *Reconciler) reconcileScale(ctx context.Context, s *scope) (time.Duration, error) {
	if !s.machinesRead {
		return 0, nil
	}
	// Machines that miss their objects get them before anything else is
	// decided; a failure is reported and retried, and does not stop the
	// planner.
	repairErr := r.repairMachines(ctx, s)
	if repairErr != nil && s.actionErr == nil {
		s.actionErr = repairErr
	}
	after, err := r.scale(ctx, s)
	return after, kerrors.NewAggregate([]error{repairErr, err})
}

// scale asks the planner for the next step and takes it.
func (r *Reconciler) scale(ctx context.Context, s *scope) (time.Duration, error) {
	if s.certs == nil {
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
		return r.createMachine(ctx, s)
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
		if err := conditions.ApplyPaced(ctx, r.Client, r.pacer, m.machine, clusterv1.GroupVersion.WithKind(clusterv1.MachineKind), cond, FieldManager, s.now); err != nil {
			errs = append(errs, fmt.Errorf("setting UpToDate on Machine %s: %w", m.machine.Name, err))
		}
	}
	return 0, kerrors.NewAggregate(errs)
}
