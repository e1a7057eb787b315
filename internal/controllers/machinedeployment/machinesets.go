package machinedeployment

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/index"
	"capstan.dev/capstan/internal/patch"
	"capstan.dev/capstan/internal/plan"
)

// scope is everything one reconcile learns about a MachineDeployment.
type scope struct {
	md      *clusterv1.MachineDeployment
	cluster *clusterv1.Cluster
	now     time.Time
	paused  bool
	waiting string // why nothing was done, when the Cluster is missing

	setsRead bool
	// sets are the MachineSets the MachineDeployment controls, oldest first.
	sets []*clusterv1.MachineSet
	// machines are the MachineDeployment's Machines, by MachineSet name.
	machines    map[string][]*clusterv1.Machine
	allMachines []*clusterv1.Machine

	// upToDate marks the sets whose template is the MachineDeployment's and
	// that rollout.after does not outdate; current is the oldest of them.
	upToDate map[string]bool
	current  *clusterv1.MachineSet
	// scaled is the set that takes new replicas: current, or while the
	// rollout is paused and no set is up to date, the newest one.
	scaled *clusterv1.MachineSet
	// created is the set this reconcile created.
	created *clusterv1.MachineSet

	plan    *plan.RolloutPlan
	planErr error

	requeueAfter time.Duration
	deleting     string
}

// reconcileMetadata makes the MachineDeployment carry what it must: the
// finalizer, the cluster-name label, an owner reference to its Cluster, and
// the defaults an admission webhook would have filled in.
func (r *Reconciler) reconcileMetadata(s *scope) {
	md := s.md
	controllerutil.AddFinalizer(md, clusterv1.MachineDeploymentFinalizer)
	if md.Labels == nil {
		md.Labels = map[string]string{}
	}
	md.Labels[clusterv1.ClusterNameLabel] = md.Spec.ClusterName
	ensureOwnerReference(md, s.cluster)
	defaultSelector(md)
	if md.Spec.Replicas == nil {
		md.Spec.Replicas = ptr.To(plan.DefaultReplicas(md.Annotations))
	}
}

// ensureOwnerReference makes the Cluster an owner (not the controller) of
// the MachineDeployment, as it is in Cluster API.
func ensureOwnerReference(md *clusterv1.MachineDeployment, c *clusterv1.Cluster) {
	ref := metav1.OwnerReference{
		APIVersion: clusterv1.GroupVersion.String(),
		Kind:       "Cluster",
		Name:       c.Name,
		UID:        c.UID,
	}
	refs := md.GetOwnerReferences()
	for i := range refs {
		if refs[i].Kind == ref.Kind && refs[i].Name == ref.Name && strings.HasPrefix(refs[i].APIVersion, clusterv1.GroupVersion.Group+"/") {
			if refs[i].UID != ref.UID || refs[i].APIVersion != ref.APIVersion {
				refs[i].UID, refs[i].APIVersion = ref.UID, ref.APIVersion
				md.SetOwnerReferences(refs)
			}
			return
		}
	}
	md.SetOwnerReferences(append(refs, ref))
}

// defaultSelector fills an empty selector (left out, `{}` or
// `{matchLabels: {}}`, as upstream's templates write it) as Cluster API's
// defaulting does: the deployment-name and cluster-name labels, in the
// selector and in the template's labels.
func defaultSelector(md *clusterv1.MachineDeployment) {
	sel := &md.Spec.Selector
	if len(sel.MatchLabels) > 0 || len(sel.MatchExpressions) > 0 {
		return
	}
	sel.MatchLabels = map[string]string{
		clusterv1.MachineDeploymentNameLabel: md.Name,
		clusterv1.ClusterNameLabel:           md.Spec.ClusterName,
	}
	if md.Spec.Template.Labels == nil {
		md.Spec.Template.Labels = map[string]string{}
	}
	maps.Copy(md.Spec.Template.Labels, sel.MatchLabels)
}

// readMachineSets lists, from the cache, the MachineSets the
// MachineDeployment controls (adopting orphans that match its selector when
// adopt is set) and their Machines, and tells which sets are up to date.
func (r *Reconciler) readMachineSets(ctx context.Context, s *scope, adopt bool) error {
	md := s.md
	all := &clusterv1.MachineSetList{}
	if err := r.Client.List(ctx, all, index.InCluster(md.Namespace, md.Spec.ClusterName)...); err != nil {
		return err
	}
	sel, err := selectorOf(md)
	if err != nil {
		return fmt.Errorf("spec.selector: %w", err)
	}
	for i := range all.Items {
		ms := &all.Items[i]
		ref := metav1.GetControllerOf(ms)
		switch {
		case ref != nil:
			if !isController(ref, md) {
				continue
			}
		case !adopt || sel.Empty() || ms.Spec.ClusterName != md.Spec.ClusterName ||
			!ms.DeletionTimestamp.IsZero() || !sel.Matches(labels.Set(ms.Labels)):
			continue
		default:
			adopted, err := r.adopt(ctx, md, ms)
			if err != nil {
				return err
			}
			ms = adopted
		}
		s.sets = append(s.sets, ms)
	}
	slices.SortFunc(s.sets, func(a, b *clusterv1.MachineSet) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return cmp.Compare(a.Name, b.Name)
	})

	machines := &clusterv1.MachineList{}
	if err := r.Client.List(ctx, machines, append(index.InCluster(md.Namespace, md.Spec.ClusterName),
		client.MatchingLabels{clusterv1.MachineDeploymentNameLabel: md.Name})...); err != nil {
		return err
	}
	owned := make(map[string]bool, len(s.sets))
	for _, ms := range s.sets {
		owned[ms.Name] = true
	}
	s.machines = map[string][]*clusterv1.Machine{}
	for i := range machines.Items {
		m := &machines.Items[i]
		ref := metav1.GetControllerOf(m)
		if ref == nil || ref.Kind != clusterv1.MachineSetKind || !owned[ref.Name] {
			continue
		}
		s.machines[ref.Name] = append(s.machines[ref.Name], m)
		s.allMachines = append(s.allMachines, m)
	}
	s.setsRead = true
	r.classify(s)
	return nil
}

// adopt makes md the controller of an orphaned MachineSet.
func (r *Reconciler) adopt(ctx context.Context, md *clusterv1.MachineDeployment, orphan *clusterv1.MachineSet) (*clusterv1.MachineSet, error) {
	ms := orphan.DeepCopy()
	helper, err := patch.NewHelper(ms, r.Client)
	if err != nil {
		return nil, err
	}
	if err := controllerutil.SetControllerReference(md, ms, r.Client.Scheme()); err != nil {
		return nil, err
	}
	if err := helper.Patch(ctx, ms); err != nil {
		return nil, fmt.Errorf("adopting MachineSet %s: %w", ms.Name, err)
	}
	r.event(md, "Normal", "SuccessfulAdopt", "Adopt", fmt.Sprintf("Adopted MachineSet %s, which matches the selector", ms.Name))
	return ms, nil
}

// classify marks the up-to-date sets and chooses the one to scale.
func (r *Reconciler) classify(s *scope) {
	md := s.md
	after := md.Spec.Rollout.After
	if !after.IsZero() && s.now.Before(after.Time) {
		// Wake exactly when the sets made before it become outdated.
		s.requeueAfter = after.Sub(s.now)
	}
	s.upToDate = map[string]bool{}
	s.current, s.scaled = nil, nil
	for _, ms := range s.sets {
		if !ms.DeletionTimestamp.IsZero() {
			continue
		}
		if plan.OutdatedByRolloutAfter(ms.CreationTimestamp.Time, after.Time, s.now) {
			continue
		}
		if plan.TemplateUpToDate(&ms.Spec.Template, &md.Spec.Template) {
			s.upToDate[ms.Name] = true
			if s.current == nil || moreReplicas(ms, s.current) {
				s.current = ms
			}
		}
	}
	s.scaled = s.current
	if s.scaled == nil && rolloutPaused(md) {
		// A paused rollout still scales: the newest set takes the replicas.
		for _, ms := range s.sets {
			if !ms.DeletionTimestamp.IsZero() {
				continue
			}
			if s.scaled == nil || newer(ms, s.scaled) {
				s.scaled = ms
			}
		}
	}
}

// moreReplicas tells whether a should be the deployment's current set rather
// than b when both are up to date: the one holding more replicas wins (sets
// are visited oldest first, so a tie keeps the older). Creation times do not
// decide alone because a move re-creates every set with new timestamps, and
// picking another set would replace every Machine.
func moreReplicas(a, b *clusterv1.MachineSet) bool {
	return ptr.Deref(a.Spec.Replicas, 0) > ptr.Deref(b.Spec.Replicas, 0)
}

func rolloutPaused(md *clusterv1.MachineDeployment) bool { return ptr.Deref(md.Spec.Paused, false) }

// newer orders sets by revision, then by creation.
func newer(a, b *clusterv1.MachineSet) bool {
	ra, rb := plan.Revision(a), plan.Revision(b)
	if ra != rb {
		return ra > rb
	}
	return b.CreationTimestamp.Before(&a.CreationTimestamp)
}

// hashAlphabet spells hashes in names: lower-case letters and digits
// without vowels or look-alikes, so no word or ambiguous string comes out.
const hashAlphabet = "bcdfghjklmnpqrstvwxz2456789"

// templateHash is a short, name-safe digest of the part of a template whose
// change needs new Machines. A salt above 0 gives other names for the same
// template, for when the first is taken.
func templateHash(t *clusterv1.MachineTemplateSpec, salt int) string {
	h := fnv.New64a()
	b, _ := json.Marshal(plan.RolloutTemplate(t))
	_, _ = h.Write(b)
	if salt > 0 {
		_, _ = fmt.Fprintf(h, "/%d", salt)
	}
	v := h.Sum64()
	out := make([]byte, 10)
	for i := range out {
		out[i] = hashAlphabet[v%uint64(len(hashAlphabet))]
		v /= uint64(len(hashAlphabet))
	}
	return string(out)
}

// setName is the name of a MachineSet for a hash. Machines carry it in a
// label, so it stays within 63 characters.
func setName(md *clusterv1.MachineDeployment, hash string) string {
	base := md.Name
	if limit := 63 - len(hash) - 1; len(base) > limit {
		base = strings.TrimRight(base[:limit], "-.")
	}
	return base + "-" + hash
}

// propagatedAnnotations are the MachineDeployment's annotations that its
// up-to-date MachineSet carries too.
func propagatedAnnotations(md *clusterv1.MachineDeployment) map[string]string {
	out := map[string]string{}
	for k, v := range md.Annotations {
		switch k {
		case "kubectl.kubernetes.io/last-applied-configuration",
			clusterv1.RevisionAnnotation, clusterv1.DesiredReplicasAnnotation, clusterv1.MaxReplicasAnnotation,
			clusterv1.PausedAnnotation, clusterv1.DisableMachineCreateAnnotation:
			continue
		}
		out[k] = v
	}
	return out
}

// templateLabels are the labels a set's template must have: the
// MachineDeployment's template labels, the deployment-name label (so its
// Machines can be found), and whatever the set's own selector asks for.
func templateLabels(md *clusterv1.MachineDeployment, selector metav1.LabelSelector) map[string]string {
	out := maps.Clone(md.Spec.Template.Labels)
	if out == nil {
		out = map[string]string{}
	}
	out[clusterv1.MachineDeploymentNameLabel] = md.Name
	maps.Copy(out, selector.MatchLabels)
	return out
}

// newMachineSet is the MachineSet for the MachineDeployment's template.
func newMachineSet(md *clusterv1.MachineDeployment, name, hash string, replicas, maxReplicas int32, revision int64) *clusterv1.MachineSet {
	selector := *md.Spec.Selector.DeepCopy()
	if selector.MatchLabels == nil {
		selector.MatchLabels = map[string]string{}
	}
	selector.MatchLabels[clusterv1.MachineDeploymentUniqueLabel] = hash
	// The set is born with what its own controller would add at once (its
	// finalizer, the cluster name in selector and template), which saves
	// that controller a write.
	selector.MatchLabels[clusterv1.ClusterNameLabel] = md.Spec.ClusterName

	template := *md.Spec.Template.DeepCopy()
	template.Labels = templateLabels(md, selector)
	if len(template.Annotations) == 0 {
		template.Annotations = nil
	}

	setLabels := maps.Clone(md.Spec.Template.Labels)
	if setLabels == nil {
		setLabels = map[string]string{}
	}
	setLabels[clusterv1.MachineDeploymentNameLabel] = md.Name
	setLabels[clusterv1.ClusterNameLabel] = md.Spec.ClusterName
	setLabels[clusterv1.MachineDeploymentUniqueLabel] = hash

	annotations := propagatedAnnotations(md)
	annotations[clusterv1.RevisionAnnotation] = strconv.FormatInt(revision, 10)
	annotations[clusterv1.DesiredReplicasAnnotation] = strconv.Itoa(int(ptr.Deref(md.Spec.Replicas, 0)))
	annotations[clusterv1.MaxReplicasAnnotation] = strconv.Itoa(int(maxReplicas))

	return &clusterv1.MachineSet{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:   md.Namespace,
			Name:        name,
			Labels:      setLabels,
			Annotations: annotations,
			Finalizers:  []string{clusterv1.MachineSetFinalizer},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion:         clusterv1.GroupVersion.String(),
				Kind:               clusterv1.MachineDeploymentKind,
				Name:               md.Name,
				UID:                md.UID,
				Controller:         ptr.To(true),
				BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Spec: clusterv1.MachineSetSpec{
			ClusterName:   md.Spec.ClusterName,
			Replicas:      ptr.To(replicas),
			Selector:      selector,
			Template:      template,
			MachineNaming: md.Spec.MachineNaming,
			Deletion:      clusterv1.MachineSetDeletionSpec{Order: md.Spec.Deletion.Order},
		},
	}
}

// syncSet puts on a MachineSet what the MachineDeployment keeps there
// without a rollout. Every set it controls carries the deployment-name and
// cluster-name labels, and only the set that takes new replicas may create
// Machines. The up-to-date set also gets the template's labels and
// annotations, the in-place Machine fields, the deletion order and the
// Machine naming. Old sets keep what they had: changes made together with a
// rollout reach only the new set.
func syncSet(md *clusterv1.MachineDeployment, ms *clusterv1.MachineSet, upToDate, mayCreate bool) {
	if ms.Labels == nil {
		ms.Labels = map[string]string{}
	}
	ms.Labels[clusterv1.MachineDeploymentNameLabel] = md.Name
	ms.Labels[clusterv1.ClusterNameLabel] = md.Spec.ClusterName
	if mayCreate {
		delete(ms.Annotations, clusterv1.DisableMachineCreateAnnotation)
	} else if ms.Annotations[clusterv1.DisableMachineCreateAnnotation] != "true" {
		if ms.Annotations == nil {
			ms.Annotations = map[string]string{}
		}
		ms.Annotations[clusterv1.DisableMachineCreateAnnotation] = "true"
	}
	if !upToDate {
		return
	}
	maps.Copy(ms.Labels, md.Spec.Template.Labels)
	if a := propagatedAnnotations(md); len(a) > 0 {
		if ms.Annotations == nil {
			ms.Annotations = map[string]string{}
		}
		maps.Copy(ms.Annotations, a)
	}
	t := &ms.Spec.Template
	t.Labels = templateLabels(md, ms.Spec.Selector)
	t.Annotations = maps.Clone(md.Spec.Template.Annotations)
	if len(t.Annotations) == 0 {
		t.Annotations = nil
	}
	t.Spec.MinReadySeconds = md.Spec.Template.Spec.MinReadySeconds
	t.Spec.ReadinessGates = slices.Clone(md.Spec.Template.Spec.ReadinessGates)
	t.Spec.Deletion = md.Spec.Template.Spec.Deletion
	t.Spec.Taints = slices.Clone(md.Spec.Template.Spec.Taints)
	ms.Spec.Deletion.Order = md.Spec.Deletion.Order
	ms.Spec.MachineNaming = md.Spec.MachineNaming
}
