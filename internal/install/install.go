package install

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"capstan.dev/capstan/internal/deploy"
	"capstan.dev/capstan/internal/progress"
	"capstan.dev/capstan/internal/webhook"
)

var clusterListGVK = schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "ClusterList"}

// FieldManager owns the fields Capstan's CLI applies.
const FieldManager = "capstan"

// Installed is what a cluster holds of Capstan.
type Installed struct {
	// Found is true when the manager Deployment exists, or the
	// capstan-system namespace records a version. A namespace that records
	// none and holds no manager is not an installation: the embedded plane
	// (capstan up) keeps clusterctl's inventory there.
	Found bool
	// Version is the recorded version; empty when none is recorded (for
	// example, installed with kubectl apply -f capstan.yaml).
	Version string
	// Image is the manager Deployment's image, empty without one.
	Image string
}

// Inspect tells what of Capstan the cluster holds.
func Inspect(ctx context.Context, c client.Client) (Installed, error) {
	var in Installed
	ns := &corev1.Namespace{}
	switch err := c.Get(ctx, client.ObjectKey{Name: deploy.Namespace}, ns); {
	case apierrors.IsNotFound(err):
	case err != nil:
		return in, fmt.Errorf("reading namespace %s: %w", deploy.Namespace, err)
	case ns.DeletionTimestamp == nil:
		in.Version = ns.Annotations[deploy.VersionAnnotation]
		in.Found = in.Version != ""
	}
	d := &appsv1.Deployment{}
	switch err := c.Get(ctx, client.ObjectKey{Namespace: deploy.Namespace, Name: deploy.ManagerName}, d); {
	case apierrors.IsNotFound(err):
	case err != nil:
		return in, fmt.Errorf("reading Deployment %s/%s: %w", deploy.Namespace, deploy.ManagerName, err)
	default:
		in.Found = true
		if len(d.Spec.Template.Spec.Containers) > 0 {
			in.Image = d.Spec.Template.Spec.Containers[0].Image
		}
	}
	return in, nil
}

// Apply applies every object with server-side apply, in order, taking
// ownership of the fields Capstan sets.
func Apply(ctx context.Context, c client.Client, objs []client.Object) error {
	for _, obj := range objs {
		obj = obj.DeepCopyObject().(client.Object)
		if err := c.Patch(ctx, obj, client.Apply, client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
			return fmt.Errorf("applying %s: %w", describe(obj), err)
		}
	}
	return nil
}

func describe(obj client.Object) string {
	kind := obj.GetObjectKind().GroupVersionKind().Kind
	if obj.GetNamespace() != "" {
		return kind + " " + obj.GetNamespace() + "/" + obj.GetName()
	}
	return kind + " " + obj.GetName()
}

// CRDNames are the names of the CustomResourceDefinitions among objs.
func CRDNames(objs []client.Object) []string {
	var names []string
	for _, obj := range objs {
		if _, ok := obj.(*apiextensionsv1.CustomResourceDefinition); ok {
			names = append(names, obj.GetName())
		}
	}
	return names
}

// Wait waits until every CRD among crds is Established and the manager
// Deployment has rolled out and is Available, printing a line to out each
// time what it waits on changes. On timeout its error says what is not
// ready: the CRDs, the Deployment's conditions and its Pods' state.
func Wait(ctx context.Context, c client.Client, crds []string, out io.Writer, timeout time.Duration) error {
	return wait(ctx, c, crds, true, out, timeout)
}

// WaitCRDs waits only until the CRDs are Established, as Wait does.
func WaitCRDs(ctx context.Context, c client.Client, crds []string, out io.Writer, timeout time.Duration) error {
	return wait(ctx, c, crds, false, out, timeout)
}

func wait(ctx context.Context, c client.Client, crds []string, manager bool, out io.Writer, timeout time.Duration) error {
	report := progress.New(out)
	defer report.Stop()
	deadline := time.Now().Add(timeout)
	for {
		waiting, detail, err := notReady(ctx, c, crds, manager)
		if err != nil && ctx.Err() != nil {
			return err
		}
		line := waiting
		if err != nil {
			line = "cannot read the cluster: " + err.Error()
		}
		if line == "" {
			if manager {
				report.Status("CRDs established; manager Deployment available")
			} else {
				report.Status("CRDs established")
			}
			return nil
		}
		var details []string
		if detail != "" {
			details = strings.Split(detail, "\n")
		}
		report.Status("waiting for "+line, details...)
		if time.Now().After(deadline) {
			msg := fmt.Sprintf("Capstan is not ready after %s: still waiting for %s", timeout, line)
			if detail != "" {
				msg += "\n" + detail
			}
			return errors.New(msg)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// notReady returns a one-line summary of what is not ready (empty when all
// is), and a longer explanation for a timeout message.
func notReady(ctx context.Context, c client.Client, crds []string, manager bool) (string, string, error) {
	var pending []string
	for _, name := range crds {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			if apierrors.IsNotFound(err) {
				pending = append(pending, name)
				continue
			}
			return "", "", err
		}
		if !crdEstablished(crd) {
			pending = append(pending, name)
		}
	}
	if len(pending) > 0 {
		return fmt.Sprintf("CRDs to be established: %d/%d", len(crds)-len(pending), len(crds)),
			"CRDs not established: " + strings.Join(pending, ", "), nil
	}
	if !manager {
		return "", "", nil
	}
	d := &appsv1.Deployment{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: deploy.Namespace, Name: deploy.ManagerName}, d); err != nil {
		if apierrors.IsNotFound(err) {
			return "the manager Deployment to be created", "", nil
		}
		return "", "", err
	}
	summary := deploymentNotReady(d)
	if summary == "" {
		return "", "", nil
	}
	pods, err := podsOf(ctx, c, d)
	if err != nil {
		return "", "", err
	}
	line := fmt.Sprintf("Deployment %s/%s to be available: %s", d.Namespace, d.Name, summary)
	if len(pods) > 0 {
		line += "; " + pods[0]
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Deployment %s/%s: %s\n", d.Namespace, d.Name, summary)
	for _, cond := range d.Status.Conditions {
		fmt.Fprintf(&b, "  condition %s=%s %s: %s\n", cond.Type, cond.Status, cond.Reason, cond.Message)
	}
	if len(pods) == 0 {
		b.WriteString("  no Pods (is the cluster's controller manager running?)\n")
	}
	for _, p := range pods {
		fmt.Fprintf(&b, "  %s\n", p)
	}
	return line, strings.TrimRight(b.String(), "\n"), nil
}

func crdEstablished(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, cond := range crd.Status.Conditions {
		if cond.Type == apiextensionsv1.Established {
			return cond.Status == apiextensionsv1.ConditionTrue
		}
	}
	return false
}

// deploymentNotReady says why the Deployment has not finished rolling out
// its current template, or "" when it has and is available.
func deploymentNotReady(d *appsv1.Deployment) string {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	s := d.Status
	switch {
	case s.ObservedGeneration < d.Generation:
		return "its controller has not seen the latest spec yet"
	case s.UpdatedReplicas < want:
		return fmt.Sprintf("%d/%d replicas updated", s.UpdatedReplicas, want)
	case s.Replicas > s.UpdatedReplicas:
		return fmt.Sprintf("%d old replicas still terminating", s.Replicas-s.UpdatedReplicas)
	case s.AvailableReplicas < want:
		return fmt.Sprintf("%d/%d replicas available", s.AvailableReplicas, want)
	}
	for _, cond := range s.Conditions {
		if cond.Type == appsv1.DeploymentAvailable && cond.Status != corev1.ConditionTrue {
			return "condition Available is " + string(cond.Status) + ": " + cond.Message
		}
	}
	return ""
}

// podsOf describes the Deployment's Pods, one line each.
func podsOf(ctx context.Context, c client.Client, d *appsv1.Deployment) ([]string, error) {
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("Deployment %s/%s selector: %w", d.Namespace, d.Name, err)
	}
	list := &corev1.PodList{}
	if err := c.List(ctx, list, client.InNamespace(d.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil, err
	}
	var lines []string
	for _, p := range list.Items {
		lines = append(lines, describePod(&p))
	}
	sort.Strings(lines)
	return lines, nil
}

func describePod(p *corev1.Pod) string {
	parts := []string{"pod " + p.Name + " " + string(p.Status.Phase)}
	if p.DeletionTimestamp != nil {
		parts = append(parts, "terminating")
	}
	if p.Spec.NodeName != "" {
		parts = append(parts, "on node "+p.Spec.NodeName)
	}
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodScheduled && cond.Status != corev1.ConditionTrue {
			parts = append(parts, "not scheduled: "+cond.Message)
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		st := "container " + cs.Name
		switch {
		case cs.State.Waiting != nil:
			st += " waiting (" + cs.State.Waiting.Reason
			if cs.State.Waiting.Message != "" {
				st += ": " + cs.State.Waiting.Message
			}
			st += ")"
		case cs.State.Terminated != nil:
			st += fmt.Sprintf(" terminated (%s, exit code %d)", cs.State.Terminated.Reason, cs.State.Terminated.ExitCode)
		case cs.State.Running != nil:
			st += " running"
		}
		if !cs.Ready {
			st += ", not ready"
		}
		if cs.RestartCount > 0 {
			st += fmt.Sprintf(", %d restarts", cs.RestartCount)
		}
		parts = append(parts, st)
	}
	return strings.Join(parts, ", ")
}

// Plan is what an upgrade would do.
type Plan struct {
	// From is the installed version ("" when none is recorded), To this
	// binary's.
	From, To string
	// FromImage and ToImage are the manager's images.
	FromImage, ToImage string
	// ChangedCRDs are the CRDs that applying would create or change.
	ChangedCRDs []string
	// Migrations are the CRDs whose stored objects still need migrating.
	Migrations []string
}

// UpToDate reports whether the upgrade has nothing to do.
func (p Plan) UpToDate() bool {
	return p.From == p.To && p.FromImage == p.ToImage && len(p.ChangedCRDs) == 0 && len(p.Migrations) == 0
}

// MakePlan compares the installation with objs (the new version's objects)
// by dry-run applies, so what the server would default is no difference.
func MakePlan(ctx context.Context, c client.Client, objs []client.Object, toVersion string) (Plan, error) {
	in, err := Inspect(ctx, c)
	if err != nil {
		return Plan{}, err
	}
	p := Plan{From: in.Version, To: toVersion, FromImage: in.Image}
	for _, obj := range objs {
		switch o := obj.(type) {
		case *appsv1.Deployment:
			if len(o.Spec.Template.Spec.Containers) > 0 {
				p.ToImage = o.Spec.Template.Spec.Containers[0].Image
			}
		case *apiextensionsv1.CustomResourceDefinition:
			live := &apiextensionsv1.CustomResourceDefinition{}
			if err := c.Get(ctx, client.ObjectKey{Name: o.Name}, live); err != nil {
				if apierrors.IsNotFound(err) {
					p.ChangedCRDs = append(p.ChangedCRDs, o.Name)
					continue
				}
				return p, fmt.Errorf("reading CRD %s: %w", o.Name, err)
			}
			dry := o.DeepCopy()
			if err := c.Patch(ctx, dry, client.Apply, client.FieldOwner(FieldManager), client.ForceOwnership, client.DryRunAll); err != nil {
				return p, fmt.Errorf("dry-run apply of CRD %s: %w", o.Name, err)
			}
			if !apiequality.Semantic.DeepEqual(dry.Spec, live.Spec) || !apiequality.Semantic.DeepEqual(dry.Labels, live.Labels) {
				p.ChangedCRDs = append(p.ChangedCRDs, o.Name)
			}
		}
	}
	if p.Migrations, err = Pending(ctx, c, CRDNames(objs)); err != nil {
		return p, err
	}
	return p, nil
}

// DeleteOptions choose what Delete removes.
type DeleteOptions struct {
	// IncludeCRDs also deletes Capstan's CRDs, and with them every Cluster
	// API object of their kinds.
	IncludeCRDs bool
	// Force deletes the CRDs even while Cluster objects exist.
	Force bool
	// Timeout bounds the wait for the namespace to go.
	Timeout time.Duration
	Out     io.Writer
}

// Delete removes the installation described by objs: the manager, its
// RBAC and the namespace, waiting until the namespace is gone (so the
// manager no longer runs); the CRDs, and so every Cluster API object, only
// with IncludeCRDs.
func Delete(ctx context.Context, c client.Client, objs []client.Object, o DeleteOptions) error {
	if o.IncludeCRDs && !o.Force {
		if err := refuseWithClusters(ctx, c); err != nil {
			return err
		}
	}
	var ns client.Object
	var crds []client.Object
	// The manager first, so it stops acting before its rights go.
	ordered := make([]client.Object, 0, len(objs))
	for _, obj := range objs {
		switch obj.(type) {
		case *apiextensionsv1.CustomResourceDefinition:
			crds = append(crds, obj)
		case *corev1.Namespace:
			ns = obj
		case *appsv1.Deployment:
			ordered = append([]client.Object{obj}, ordered...)
		default:
			ordered = append(ordered, obj)
		}
	}
	// The webhook configurations go with the manager, also those of an
	// installation older than the manifest that ships them.
	ordered = append(ordered, webhook.Configurations()...)
	for _, obj := range ordered {
		if err := deleteObject(ctx, c, obj); err != nil {
			return err
		}
	}
	if ns != nil {
		if err := deleteObject(ctx, c, ns); err != nil {
			return err
		}
		fmt.Fprintf(o.Out, "Waiting for namespace %s to be deleted\n", ns.GetName())
		if err := waitGone(ctx, c, ns, o.Timeout); err != nil {
			return err
		}
	}
	if o.IncludeCRDs {
		for _, obj := range crds {
			if err := deleteObject(ctx, c, obj); err != nil {
				return err
			}
		}
		fmt.Fprintf(o.Out, "Deleted %d CRDs; the API server removes their objects\n", len(crds))
	}
	return nil
}

func deleteObject(ctx context.Context, c client.Client, obj client.Object) error {
	obj = obj.DeepCopyObject().(client.Object)
	err := c.Delete(ctx, obj, client.PropagationPolicy(metav1.DeletePropagationBackground))
	if err != nil && !apierrors.IsNotFound(err) && !meta.IsNoMatchError(err) {
		return fmt.Errorf("deleting %s: %w", describe(obj), err)
	}
	return nil
}

func waitGone(ctx context.Context, c client.Client, obj client.Object, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		cur := obj.DeepCopyObject().(client.Object)
		err := c.Get(ctx, client.ObjectKeyFromObject(obj), cur)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if time.Now().After(deadline) {
			msg := fmt.Sprintf("%s is still there after %s", describe(obj), timeout)
			if ns, ok := cur.(*corev1.Namespace); ok && err == nil {
				for _, cond := range ns.Status.Conditions {
					if cond.Status == corev1.ConditionTrue {
						msg += fmt.Sprintf("; %s: %s", cond.Type, cond.Message)
					}
				}
			}
			return errors.New(msg)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// refuseWithClusters fails when Cluster objects exist, saying how many and
// in which namespaces.
func refuseWithClusters(ctx context.Context, c client.Client) error {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(clusterListGVK)
	if err := c.List(ctx, list); err != nil {
		if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("counting Cluster objects: %w", err)
	}
	if len(list.Items) == 0 {
		return nil
	}
	perNS := map[string]int{}
	for _, item := range list.Items {
		perNS[item.Namespace]++
	}
	var where []string
	for ns, n := range perNS {
		where = append(where, fmt.Sprintf("%d in %s", n, ns))
	}
	sort.Strings(where)
	return fmt.Errorf("%d Cluster objects exist (%s): deleting the CRDs would delete them and leave their machines behind; delete the clusters first, or pass --force",
		len(list.Items), strings.Join(where, ", "))
}
