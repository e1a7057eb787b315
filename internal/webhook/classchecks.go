package webhook

import (
	"fmt"
	"strings"

	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/version"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

// classesCompatible refuses replacing class old by cc where a Cluster's
// objects could not follow: the group or kind of the infrastructure
// cluster, control plane or a worker class's infrastructure template
// changed, or the control plane's machine infrastructure added or removed.
// It applies to a change of a class and to a Cluster moved from one class to
// another (rebase). Bootstrap templates may change kind.
func classesCompatible(old, cc *clusterv1.ClusterClass) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	same := func(path *field.Path, before, after clusterv1.ClusterClassTemplateReference) {
		b, a := before.GroupVersionKind().GroupKind(), after.GroupVersionKind().GroupKind()
		if b.Group != a.Group {
			errs = append(errs, field.Forbidden(path.Child("apiVersion"), fmt.Sprintf(
				"the group cannot change from %q to %q: the Clusters' existing objects could not follow; make a new ClusterClass for the new kinds", b.Group, a.Group)))
		}
		if b.Kind != a.Kind {
			errs = append(errs, field.Forbidden(path.Child("kind"), fmt.Sprintf(
				"cannot change from %q to %q: the Clusters' existing objects could not follow; make a new ClusterClass for the new kinds", b.Kind, a.Kind)))
		}
	}
	same(spec.Child("infrastructure", "templateRef"), old.Spec.Infrastructure.TemplateRef, cc.Spec.Infrastructure.TemplateRef)
	same(spec.Child("controlPlane", "templateRef"), old.Spec.ControlPlane.TemplateRef, cc.Spec.ControlPlane.TemplateRef)
	before, after := old.Spec.ControlPlane.MachineInfrastructure.TemplateRef, cc.Spec.ControlPlane.MachineInfrastructure.TemplateRef
	switch path := spec.Child("controlPlane", "machineInfrastructure"); {
	case before.IsDefined() && !after.IsDefined():
		errs = append(errs, field.Forbidden(path, "cannot be removed: the control plane's Machines are made from it"))
	case !before.IsDefined() && after.IsDefined():
		errs = append(errs, field.Forbidden(path, "cannot be added: the control plane does not run on Machines the class describes"))
	case before.IsDefined():
		same(path.Child("templateRef"), before, after)
	}
	for i, c := range cc.Spec.Workers.MachineDeployments {
		for _, o := range old.Spec.Workers.MachineDeployments {
			if o.Class == c.Class {
				same(spec.Child("workers", "machineDeployments").Index(i).Child("infrastructure", "templateRef"), o.Infrastructure.TemplateRef, c.Infrastructure.TemplateRef)
			}
		}
	}
	for i, c := range cc.Spec.Workers.MachinePools {
		for _, o := range old.Spec.Workers.MachinePools {
			if o.Class == c.Class {
				same(spec.Child("workers", "machinePools").Index(i).Child("infrastructure", "templateRef"), o.Infrastructure.TemplateRef, c.Infrastructure.TemplateRef)
			}
		}
	}
	return errs
}

// kubernetesVersionsValid refuses a kubernetesVersions list that is not a
// chain an upgrade can walk: every entry a semantic version, each newer than
// the one before, no minor version skipped.
func kubernetesVersionsValid(versions []string) field.ErrorList {
	var errs field.ErrorList
	path := field.NewPath("spec", "kubernetesVersions")
	var prev *version.Version
	for i, s := range versions {
		v, err := version.ParseSemantic(strings.TrimPrefix(s, "v"))
		if err != nil {
			errs = append(errs, field.Invalid(path.Index(i), s, "must be a Kubernetes version such as v1.33.1: "+err.Error()))
			continue
		}
		if prev != nil {
			// The same version with other build metadata is tolerated, as
			// upstream does.
			same := !v.LessThan(prev) && !prev.LessThan(v) // build metadata aside
			if v.LessThan(prev) || (same && v.BuildMetadata() == prev.BuildMetadata()) {
				errs = append(errs, field.Invalid(path.Index(i), s, fmt.Sprintf("must be newer than the entry before it (v%s): list the versions oldest first, each once", prev)))
			}
			if v.Major() == prev.Major() && v.Minor() > prev.Minor()+1 {
				errs = append(errs, field.Invalid(path.Index(i), s, fmt.Sprintf("skips a minor version after v%s: list a v%d.%d version in between, upgrades go one minor at a time",
					prev, prev.Major(), prev.Minor()+1)))
			}
		}
		prev = v
	}
	return errs
}

// templateSuffix ends the kind of every template a class points at.
const templateSuffix = "Template"

// classShape checks what a class's schema does not: template kinds that
// are templates, a control plane health check only for a control plane on
// Machines, health check values, and the metadata it puts on objects.
func classShape(cc *clusterv1.ClusterClass) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	template := func(path *field.Path, ref clusterv1.ClusterClassTemplateReference) {
		if ref.Kind != "" && (!strings.HasSuffix(ref.Kind, templateSuffix) || len(ref.Kind) == len(templateSuffix)) {
			errs = append(errs, field.Invalid(path.Child("kind"), ref.Kind, fmt.Sprintf("must be a template kind, <Name>%s: point the class at the template, not at the object made from it", templateSuffix)))
		}
	}
	template(spec.Child("infrastructure", "templateRef"), cc.Spec.Infrastructure.TemplateRef)
	template(spec.Child("controlPlane", "templateRef"), cc.Spec.ControlPlane.TemplateRef)
	if ref := cc.Spec.ControlPlane.MachineInfrastructure.TemplateRef; ref.IsDefined() {
		template(spec.Child("controlPlane", "machineInfrastructure", "templateRef"), ref)
	}
	errs = append(errs, metadataValid(cc.Spec.ControlPlane.Metadata, spec.Child("controlPlane", "metadata"))...)
	if hc := &cc.Spec.ControlPlane.HealthCheck; hc.IsDefined() {
		path := spec.Child("controlPlane", "healthCheck")
		if !cc.Spec.ControlPlane.MachineInfrastructure.TemplateRef.IsDefined() {
			errs = append(errs, field.Forbidden(path, "needs spec.controlPlane.machineInfrastructure: only a control plane that runs on Machines can be health-checked"))
		}
		errs = append(errs, healthCheckValues(path, hc.Checks.NodeStartupTimeoutSeconds, hc.Remediation.TriggerIf.UnhealthyLessThanOrEqualTo, nil)...)
	}
	for _, c := range cc.Spec.Workers.MachineDeployments {
		path := spec.Child("workers", "machineDeployments").Key(c.Class)
		template(path.Child("bootstrap", "templateRef"), c.Bootstrap.TemplateRef)
		template(path.Child("infrastructure", "templateRef"), c.Infrastructure.TemplateRef)
		errs = append(errs, metadataValid(c.Metadata, path.Child("metadata"))...)
		hc := &c.HealthCheck
		errs = append(errs, healthCheckValues(path.Child("healthCheck"), hc.Checks.NodeStartupTimeoutSeconds, hc.Remediation.TriggerIf.UnhealthyLessThanOrEqualTo, hc.Remediation.MaxInFlight)...)
		errs = append(errs, rollingUpdateValues(path.Child("rollout", "strategy", "rollingUpdate"), c.Rollout.Strategy.RollingUpdate)...)
	}
	for _, c := range cc.Spec.Workers.MachinePools {
		path := spec.Child("workers", "machinePools").Key(c.Class)
		template(path.Child("bootstrap", "templateRef"), c.Bootstrap.TemplateRef)
		template(path.Child("infrastructure", "templateRef"), c.Infrastructure.TemplateRef)
		errs = append(errs, metadataValid(c.Metadata, path.Child("metadata"))...)
	}
	return errs
}

// topologyShape checks what a topology's schema does not and its class
// decides: a control plane health check only for a control plane on
// Machines, health check values, and the metadata it puts on objects.
// cc may be nil (the class is not known yet): what needs it is skipped.
func topologyShape(t *clusterv1.Topology, cc *clusterv1.ClusterClass) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, metadataValid(t.ControlPlane.Metadata, topologyPath.Child("controlPlane", "metadata"))...)
	if hc := &t.ControlPlane.HealthCheck; hc.IsDefined() {
		path := topologyPath.Child("controlPlane", "healthCheck")
		if cc != nil && !cc.Spec.ControlPlane.MachineInfrastructure.TemplateRef.IsDefined() {
			errs = append(errs, field.Forbidden(path, fmt.Sprintf("ClusterClass %s/%s has no spec.controlPlane.machineInfrastructure: only a control plane that runs on Machines can be health-checked", cc.Namespace, cc.Name)))
		}
		errs = append(errs, healthCheckValues(path, hc.Checks.NodeStartupTimeoutSeconds, hc.Remediation.TriggerIf.UnhealthyLessThanOrEqualTo, nil)...)
	}
	for _, md := range t.Workers.MachineDeployments {
		path := topologyPath.Child("workers", "machineDeployments").Key(md.Name)
		errs = append(errs, metadataValid(md.Metadata, path.Child("metadata"))...)
		hc := &md.HealthCheck
		errs = append(errs, healthCheckValues(path.Child("healthCheck"), hc.Checks.NodeStartupTimeoutSeconds, hc.Remediation.TriggerIf.UnhealthyLessThanOrEqualTo, hc.Remediation.MaxInFlight)...)
		errs = append(errs, rollingUpdateValues(path.Child("rollout", "strategy", "rollingUpdate"), md.Rollout.Strategy.RollingUpdate)...)
	}
	for _, mp := range t.Workers.MachinePools {
		errs = append(errs, metadataValid(mp.Metadata, topologyPath.Child("workers", "machinePools").Key(mp.Name).Child("metadata"))...)
	}
	return errs
}

// minNodeStartupSeconds is the shortest node startup timeout a health check
// accepts (0 turns the check off): a Node takes longer than this to join.
const minNodeStartupSeconds = 30

// healthCheckValues checks a health check's numbers: a node startup
// timeout of 0 or at least 30 seconds, and counts that are a number or a
// percentage.
func healthCheckValues(path *field.Path, nodeStartup *int32, unhealthyAtMost, maxInFlight *intstr.IntOrString) field.ErrorList {
	var errs field.ErrorList
	if nodeStartup != nil && *nodeStartup != 0 && *nodeStartup < minNodeStartupSeconds {
		errs = append(errs, field.Invalid(path.Child("checks", "nodeStartupTimeoutSeconds"), *nodeStartup,
			fmt.Sprintf("must be 0 (no timeout) or at least %d seconds: a Node needs longer than that to join", minNodeStartupSeconds)))
	}
	count := func(p *field.Path, v *intstr.IntOrString) {
		if v == nil {
			return
		}
		if _, err := intstr.GetScaledValueFromIntOrPercent(v, 0, false); err != nil {
			errs = append(errs, field.Invalid(p, v.String(), "must be a number or a percentage such as 40%: "+err.Error()))
		}
	}
	count(path.Child("remediation", "triggerIf", "unhealthyLessThanOrEqualTo"), unhealthyAtMost)
	count(path.Child("remediation", "maxInFlight"), maxInFlight)
	return errs
}

// rollingUpdateValues checks a rolling update's bounds: each a number or a
// percentage, and not both 0 (the rollout could never move).
func rollingUpdateValues(path *field.Path, ru clusterv1.MachineDeploymentTopologyRolloutStrategyRollingUpdate) field.ErrorList {
	var errs field.ErrorList
	for _, b := range []struct {
		name string
		v    *intstr.IntOrString
	}{{"maxUnavailable", ru.MaxUnavailable}, {"maxSurge", ru.MaxSurge}} {
		if b.v == nil {
			continue
		}
		if _, err := intstr.GetScaledValueFromIntOrPercent(b.v, 0, false); err != nil {
			errs = append(errs, field.Invalid(path.Child(b.name), b.v.String(), "must be a number or a percentage such as 25%: "+err.Error()))
		}
	}
	zero := func(v *intstr.IntOrString) bool { return v != nil && v.Type == intstr.Int && v.IntVal == 0 }
	if zero(ru.MaxUnavailable) && zero(ru.MaxSurge) {
		errs = append(errs, field.Invalid(path, "maxUnavailable: 0, maxSurge: 0", "maxUnavailable and maxSurge cannot both be 0: the rollout could neither remove nor add a Machine; raise one of them"))
	}
	return errs
}

// metadataValid checks labels and annotations a class or topology puts on
// objects as the API server checks an object's own.
func metadataValid(meta clusterv1.ObjectMeta, path *field.Path) field.ErrorList {
	errs := metav1validation.ValidateLabels(meta.Labels, path.Child("labels"))
	return append(errs, apivalidation.ValidateAnnotations(meta.Annotations, path.Child("annotations"))...)
}
