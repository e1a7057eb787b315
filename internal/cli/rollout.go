package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	controlplanev1 "capstan.dev/capstan/api/controlplane/kubeadm/v1beta2"
	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/plan"
)

func init() { register(newAlphaCommand) }

func newAlphaCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "alpha", Short: "Commands whose shape may still change, as in clusterctl"}
	rollout := &cobra.Command{
		Use:   "rollout",
		Short: "Restart, pause, resume or undo the rollout of a MachineDeployment or KubeadmControlPlane",
		Long: `Restart, pause, resume or undo the rollout of a MachineDeployment (md) or a
KubeadmControlPlane (kcp). RESOURCE is KIND/NAME, for example md/demo-md-0 or
kcp/demo-control-plane.`,
	}
	target := &mgmtTarget{}
	var toRevision int64
	for _, op := range []struct {
		name, short, example string
	}{
		{"restart", "Replace every Machine, newest template or not (sets spec.rollout.after to now)", "capstan alpha rollout restart kcp/demo-control-plane"},
		{"pause", "Stop rolling out template changes until resume", "capstan alpha rollout pause md/demo-md-0"},
		{"resume", "Let a paused rollout go on", "capstan alpha rollout resume md/demo-md-0"},
		{"undo", "Put a MachineDeployment's previous template (or --to-revision's) back and roll out to it", "capstan alpha rollout undo md/demo-md-0 --to-revision 2"},
	} {
		sub := &cobra.Command{
			Use:     op.name + " RESOURCE",
			Short:   op.short,
			Example: "  " + op.example,
			Args:    exactArgs("RESOURCE"),
			RunE: func(cmd *cobra.Command, args []string) error {
				ref, err := parseRolloutResource(args[0])
				if err != nil {
					return err
				}
				c, err := target.client(g)
				if err != nil {
					return err
				}
				return runRollout(cmd.Context(), c, cmd.OutOrStdout(), op.name, ref, target.namespace, toRevision, time.Now())
			},
		}
		sub.Flags().StringVar(&target.kubeconfig, "kubeconfig", "", "kubeconfig of the management cluster (default: $KUBECONFIG, else the running capstan plane's)")
		sub.Flags().StringVarP(&target.namespace, "namespace", "n", "default", "namespace of the object")
		if op.name == "undo" {
			sub.Flags().Int64Var(&toRevision, "to-revision", 0, "revision to roll back to (default: the one before the current)")
		}
		rollout.AddCommand(sub)
	}
	cmd.AddCommand(rollout)
	return cmd
}

// rolloutResource is the object a rollout command acts on.
type rolloutResource struct {
	kind string // MachineDeployment or KubeadmControlPlane
	name string
}

func (r rolloutResource) String() string { return r.kind + "/" + r.name }

func parseRolloutResource(s string) (rolloutResource, error) {
	kind, name, ok := strings.Cut(s, "/")
	if ok && name != "" && !strings.Contains(name, "/") {
		switch strings.ToLower(kind) {
		case "md", "machinedeployment", "machinedeployments", "machinedeployment.cluster.x-k8s.io":
			return rolloutResource{kind: "MachineDeployment", name: name}, nil
		case "kcp", "kubeadmcontrolplane", "kubeadmcontrolplanes", "kubeadmcontrolplane.controlplane.cluster.x-k8s.io":
			return rolloutResource{kind: "KubeadmControlPlane", name: name}, nil
		}
	}
	return rolloutResource{}, fmt.Errorf("%q: give KIND/NAME where KIND is machinedeployment (md) or kubeadmcontrolplane (kcp), for example md/demo-md-0", s)
}

// runRollout reads the object, changes only what the operation changes and
// writes that as a merge patch; an operation that would change nothing is
// reported and writes nothing.
func runRollout(ctx context.Context, c client.Client, out io.Writer, op string, ref rolloutResource, namespace string, toRevision int64, now time.Time) error {
	if ctx == nil {
		ctx = context.Background()
	}
	key := client.ObjectKey{Namespace: namespace, Name: ref.name}
	var obj client.Object
	if ref.kind == "MachineDeployment" {
		obj = &clusterv1.MachineDeployment{}
	} else {
		obj = &controlplanev1.KubeadmControlPlane{}
	}
	if err := c.Get(ctx, key, obj); err != nil {
		return fmt.Errorf("reading %s %s/%s: %w", ref.kind, namespace, ref.name, err)
	}
	original := obj.DeepCopyObject().(client.Object)
	// Undo is computed from what was read: the write must fail rather than
	// land on a template that changed meanwhile.
	patch := client.MergeFrom(original)
	var done string
	switch o := obj.(type) {
	case *clusterv1.MachineDeployment:
		paused := ptr.Deref(o.Spec.Paused, false)
		switch op {
		case "restart":
			if paused {
				return fmt.Errorf("MachineDeployment %s/%s is paused and would not restart: run capstan alpha rollout resume md/%s first", namespace, o.Name, o.Name)
			}
			o.Spec.Rollout.After = metav1.NewTime(now.UTC().Truncate(time.Second))
			done = "restarted"
		case "pause":
			if paused {
				fmt.Fprintf(out, "MachineDeployment %s/%s is already paused.\n", namespace, o.Name)
				return nil
			}
			o.Spec.Paused = ptr.To(true)
			done = "paused"
		case "resume":
			if !paused {
				fmt.Fprintf(out, "MachineDeployment %s/%s is not paused.\n", namespace, o.Name)
				return nil
			}
			o.Spec.Paused = nil
			done = "resumed"
		case "undo":
			sets := &clusterv1.MachineSetList{}
			if err := c.List(ctx, sets, client.InNamespace(namespace)); err != nil {
				return fmt.Errorf("listing the MachineSets of MachineDeployment %s/%s: %w", namespace, o.Name, err)
			}
			tmpl, err := plan.RollbackTemplate(o, sets.Items, toRevision)
			if err != nil {
				return err
			}
			o.Spec.Template = *tmpl
			patch = client.MergeFromWithOptions(original, client.MergeFromWithOptimisticLock{})
			done = "rolled back"
			if toRevision > 0 {
				done = fmt.Sprintf("rolled back to revision %d", toRevision)
			}
		default:
			return fmt.Errorf("unknown rollout operation %q", op)
		}
	case *controlplanev1.KubeadmControlPlane:
		_, paused := o.Annotations[clusterv1.PausedAnnotation]
		switch op {
		case "restart":
			if paused {
				return fmt.Errorf("KubeadmControlPlane %s/%s is paused and would not restart: run capstan alpha rollout resume kcp/%s first", namespace, o.Name, o.Name)
			}
			o.Spec.Rollout.After = metav1.NewTime(now.UTC().Truncate(time.Second))
			done = "restarted"
		case "pause":
			if paused {
				fmt.Fprintf(out, "KubeadmControlPlane %s/%s is already paused.\n", namespace, o.Name)
				return nil
			}
			if o.Annotations == nil {
				o.Annotations = map[string]string{}
			}
			o.Annotations[clusterv1.PausedAnnotation] = ""
			done = "paused"
		case "resume":
			if !paused {
				fmt.Fprintf(out, "KubeadmControlPlane %s/%s is not paused.\n", namespace, o.Name)
				return nil
			}
			delete(o.Annotations, clusterv1.PausedAnnotation)
			done = "resumed"
		case "undo":
			return fmt.Errorf("undo is supported for MachineDeployments only: a KubeadmControlPlane keeps no revisions; roll kcp/%s back by setting its spec back (for example kubectl patch kcp %s -n %s --type merge -p '{\"spec\":{\"version\":\"<previous version>\"}}')", o.Name, o.Name, namespace)
		default:
			return fmt.Errorf("unknown rollout operation %q", op)
		}
	}
	if equality.Semantic.DeepEqual(original, obj) {
		// Revisions can share a template: a restart makes a new revision
		// of the same one. Writing it back would change nothing.
		fmt.Fprintf(out, "%s %s/%s: nothing to change, it already is what %s asks for\n", ref.kind, namespace, ref.name, op)
		return nil
	}
	if err := c.Patch(ctx, obj, patch, client.FieldOwner(fieldOwner)); err != nil {
		return fmt.Errorf("updating %s %s/%s: %w", ref.kind, namespace, ref.name, err)
	}
	fmt.Fprintf(out, "%s %s/%s %s\n", ref.kind, namespace, ref.name, done)
	return nil
}
