package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/duration"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	qemuv1 "capstan.dev/capstan/api/infrastructure/qemu/v1beta2"
	"capstan.dev/capstan/internal/atomicfile"
	"capstan.dev/capstan/internal/manager"
	"capstan.dev/capstan/internal/mgmt"
	"capstan.dev/capstan/internal/progress"
	"capstan.dev/capstan/internal/scheme"
)

// fieldOwner is the field manager of what the command line applies.
const fieldOwner = "capstan-cli"

// applyManifests server-side applies every document of a multi-document
// YAML manifest, all or nothing: every object is first applied as a
// server-side dry run, so that the API server's validation, admission and
// authorization answer for all of them before anything is written. Half a
// cluster (its Cluster without the control plane the API refused) is
// worse than none.
func applyManifests(ctx context.Context, c client.Client, manifest string) error {
	objs, err := manifestObjects(manifest)
	if err != nil {
		return fmt.Errorf("reading the manifest: %w", err)
	}
	var refused []error
	for _, obj := range objs {
		if err := c.Patch(ctx, obj.DeepCopy(), client.Apply, client.FieldOwner(fieldOwner), client.ForceOwnership, client.DryRunAll); err != nil {
			refused = append(refused, fmt.Errorf("%s %s: %w", obj.GetKind(), obj.GetName(), err))
		}
	}
	if len(refused) > 0 {
		return fmt.Errorf("the API server refuses %d of the %d objects, so none was applied:\n%w", len(refused), len(objs), errors.Join(refused...))
	}
	var applied []string
	for _, obj := range objs {
		if err := c.Patch(ctx, obj, client.Apply, client.FieldOwner(fieldOwner), client.ForceOwnership); err != nil {
			if len(applied) == 0 {
				return fmt.Errorf("applying %s %s: %w; nothing was applied", obj.GetKind(), obj.GetName(), err)
			}
			// Applying again changes what is there already into what it
			// is: running the same command finishes the cluster.
			return fmt.Errorf("applying %s %s: %w; %d of the %d objects were applied before it (%s): run the same command again to apply the rest",
				obj.GetKind(), obj.GetName(), err, len(applied), len(objs), strings.Join(applied, ", "))
		}
		applied = append(applied, obj.GetKind()+" "+obj.GetName())
	}
	return nil
}

// manifestObjects reads the objects of a multi-document YAML manifest. Every
// document but an empty one must be an object: apiVersion, kind and
// metadata.name strings, metadata.namespace a string if given. A value
// that YAML reads as another type (a name such as 123, true or 2024-01-01
// in a template that does not quote it) is an error naming the document,
// not an object the API server would refuse later or, for a namespace,
// put elsewhere.
func manifestObjects(manifest string) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(manifest), 4096)
	for doc := 1; ; doc++ {
		var raw any
		if err := dec.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, fmt.Errorf("document %d: %w", doc, err)
		}
		if raw == nil {
			continue
		}
		m, ok := raw.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("document %d is not a Kubernetes object (a YAML map)", doc)
		}
		if len(m) == 0 {
			continue
		}
		obj := &unstructured.Unstructured{Object: m}
		for _, f := range []struct {
			path     []string
			required bool
		}{
			{[]string{"apiVersion"}, true},
			{[]string{"kind"}, true},
			{[]string{"metadata", "name"}, true},
			{[]string{"metadata", "namespace"}, false},
		} {
			v, found, err := unstructured.NestedFieldNoCopy(m, f.path...)
			name := strings.Join(f.path, ".")
			if err != nil || !found && f.required {
				return nil, fmt.Errorf("document %d has no %s", doc, name)
			}
			if s, isString := v.(string); found && (!isString || s == "" && f.required) {
				return nil, fmt.Errorf("document %d (%s): %s %v is not a string (quote the value, or the variable reference, in the template)", doc, obj.GetKind(), name, v)
			}
		}
		objs = append(objs, obj)
	}
}

// createWorkloadCluster applies a cluster from the template options to the
// management plane, waits until all its Machines run and all its Nodes are
// Ready, saying what it waits for as it goes, writes the cluster's
// kubeconfig into the state directory and shows the Nodes.
func createWorkloadCluster(ctx context.Context, out io.Writer, cfg *rest.Config, dir mgmt.StateDir, name string, o *clusterTemplateOptions) error {
	manifest, err := o.render(name)
	if err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return err
	}
	if err := applyManifests(ctx, c, manifest); err != nil {
		return err
	}
	want := o.controlPlanes + o.workers
	where := "on the " + o.infrastructure + " provider"
	if o.from != "" {
		where = "from " + o.from
	}
	fmt.Fprintf(out, "Creating cluster %s/%s %s: %d control-plane and %d worker machines.\n", o.namespace, name, where, o.controlPlanes, o.workers)
	report := progress.New(out)
	defer report.Stop()
	var kubeconfig []byte
	var nodes []corev1.Node
	last := ""
	for {
		p := clusterProgress(ctx, c, o.namespace, name, want)
		report.Status(p.summary, p.waiting...)
		last = p.summary
		if p.done {
			kubeconfig, nodes = p.kubeconfig, p.nodes
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster %s is not ready: %s (inspect it with: capstan describe cluster %s -n %s)", name, last, name, o.namespace)
		case <-time.After(time.Second):
		}
	}
	report.Stop()
	path := manager.ClusterKubeconfigPath(string(dir), name)
	if err := atomicfile.WriteFile(path, kubeconfig, 0o600); err != nil {
		return fmt.Errorf("writing the cluster's kubeconfig: %w", err)
	}
	fmt.Fprintf(out, "Cluster %s is ready in %.1fs. Its nodes:\n\n", name, report.Elapsed().Seconds())
	printNodes(out, nodes)
	fmt.Fprintf(out, "\nUse it with:\n  kubectl --kubeconfig %s get nodes\n", path)
	return nil
}

// clusterState is how far a cluster being created has come.
type clusterState struct {
	done    bool
	summary string
	// waiting names each Machine or Node not there yet and what it waits on.
	waiting    []string
	kubeconfig []byte
	nodes      []corev1.Node
}

// clusterProgress says how far the cluster has come; once every Machine is
// Running and every Node Ready it carries the kubeconfig and the Nodes.
func clusterProgress(ctx context.Context, c client.Client, namespace, name string, want int) clusterState {
	cluster := &clusterv1.Cluster{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, cluster); err != nil {
		return clusterState{summary: "reading the Cluster: " + err.Error()}
	}
	machines := &clusterv1.MachineList{}
	if err := c.List(ctx, machines, client.InNamespace(namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: name}); err != nil {
		return clusterState{summary: "listing Machines: " + err.Error()}
	}
	sort.Slice(machines.Items, func(i, j int) bool { return machines.Items[i].Name < machines.Items[j].Name })
	var st clusterState
	phases := map[string]int{}
	running := 0
	var longSteps []string
	for _, m := range machines.Items {
		phase := m.Status.Phase
		if phase == "" {
			phase = string(clusterv1.MachinePhasePending)
		}
		phases[phase]++
		if m.Status.Phase == string(clusterv1.MachinePhaseRunning) {
			running++
		} else {
			st.waiting = append(st.waiting, m.Name+": "+phase+machineWaitsOn(&m))
			if step := longInfrastructureStep(&m); step != "" && !slices.Contains(longSteps, step) {
				longSteps = append(longSteps, step)
			}
		}
	}
	st.summary = fmt.Sprintf("machines %d/%d running", running, want)
	if len(phases) > 0 {
		var parts []string
		for p, n := range phases {
			parts = append(parts, fmt.Sprintf("%d %s", n, p))
		}
		sort.Strings(parts)
		st.summary += " (" + strings.Join(parts, ", ") + ")"
	}
	if cluster.Status.Initialization.ControlPlaneInitialized == nil || !*cluster.Status.Initialization.ControlPlaneInitialized {
		st.summary += "; control plane not initialized yet"
	}
	for _, step := range longSteps {
		st.summary += "; " + step
	}
	if running < want || len(machines.Items) != want {
		return st
	}
	secret := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name + "-kubeconfig"}, secret); err != nil {
		if apierrors.IsNotFound(err) {
			st.summary += "; waiting for its kubeconfig"
		} else {
			st.summary += "; reading its kubeconfig: " + err.Error()
		}
		return st
	}
	kubeconfig := secret.Data["value"]
	wcfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		st.summary += "; its kubeconfig is invalid: " + err.Error()
		return st
	}
	wcfg.Timeout = 5 * time.Second
	wc, err := client.New(wcfg, client.Options{})
	if err != nil {
		st.summary += "; " + err.Error()
		return st
	}
	nodes := &corev1.NodeList{}
	if err := wc.List(ctx, nodes); err != nil {
		st.summary += "; listing its nodes: " + err.Error()
		return st
	}
	ready := 0
	for _, n := range nodes.Items {
		if nodeReady(&n) {
			ready++
		} else {
			st.waiting = append(st.waiting, "node "+n.Name+": not Ready")
		}
	}
	st.summary = fmt.Sprintf("%s; nodes %d/%d ready", st.summary, ready, want)
	st.done = ready == want && len(nodes.Items) == want
	st.kubeconfig, st.nodes = kubeconfig, nodes.Items
	return st
}

// machineWaitsOn is the first of a Machine's conditions on its way to
// Running that is not True yet, with its message: what it waits on.
func machineWaitsOn(m *clusterv1.Machine) string {
	for _, t := range []string{clusterv1.BootstrapConfigReadyCondition, clusterv1.InfrastructureReadyCondition, clusterv1.NodeHealthyCondition} {
		for _, c := range m.Status.Conditions {
			if c.Type == t && c.Status != metav1.ConditionTrue {
				msg := c.Reason
				if c.Message != "" {
					msg += ": " + strings.ReplaceAll(c.Message, "\n", " ")
				}
				return " — " + t + " " + msg
			}
		}
	}
	return ""
}

// longInfrastructureStep is the message of a Machine's infrastructure when
// it is in a step that takes minutes, or failed at it: the QEMU provider
// building its guest image (or the build failing, say for a missing tool).
// The summary names it, so that a log or a pipe, which sees only the
// summary, tells each step of the wait rather than one unchanging line.
func longInfrastructureStep(m *clusterv1.Machine) string {
	for _, c := range m.Status.Conditions {
		if c.Type == clusterv1.InfrastructureReadyCondition && c.Status != metav1.ConditionTrue &&
			(c.Reason == qemuv1.BuildingImageReason || c.Reason == qemuv1.ImageFailedReason) {
			return strings.ReplaceAll(c.Message, "\n", " ")
		}
	}
	return ""
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// printNodes prints Nodes the way `kubectl get nodes` does.
func printNodes(out io.Writer, nodes []corev1.Node) {
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSTATUS\tROLES\tAGE\tVERSION")
	for _, n := range nodes {
		status := "NotReady"
		if nodeReady(&n) {
			status = "Ready"
		}
		var roles []string
		for l := range n.Labels {
			if r, ok := strings.CutPrefix(l, "node-role.kubernetes.io/"); ok {
				roles = append(roles, r)
			}
		}
		sort.Strings(roles)
		if len(roles) == 0 {
			roles = []string{"<none>"}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", n.Name, status, strings.Join(roles, ","),
			duration.HumanDuration(time.Since(n.CreationTimestamp.Time)), n.Status.NodeInfo.KubeletVersion)
	}
	tw.Flush()
	_, _ = out.Write(buf.Bytes())
}
