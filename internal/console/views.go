package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/describe"
)

// cacheWait bounds how long a view waits for the cache to fill before it
// says why it cannot.
const cacheWait = 3 * time.Second

// summaries are the fleet rows of every Cluster in the cache, by namespace
// and name.
func (s *Server) summaries(ctx context.Context) ([]ClusterSummary, error) {
	ctx, cancel := context.WithTimeout(ctx, cacheWait)
	defer cancel()
	list := &clusterv1.ClusterList{}
	if err := s.cache.List(ctx, list); err != nil {
		if werr := s.watchError(); werr != nil {
			err = werr
		}
		return []ClusterSummary{}, fmt.Errorf("listing Clusters: %w", err)
	}
	out := make([]ClusterSummary, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, summarize(&list.Items[i]))
	}
	slices.SortFunc(out, func(a, b ClusterSummary) int {
		if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out, nil
}

func (s *Server) handleClusters(w http.ResponseWriter, r *http.Request) {
	summaries, err := s.summaries(r.Context())
	reply := struct {
		Clusters []ClusterSummary `json:"clusters"`
		Error    string           `json:"error,omitempty"`
	}{Clusters: summaries}
	if err != nil {
		reply.Error = err.Error()
	}
	writeLargeJSON(w, r, reply)
}

// Detail is the cluster view: the describe tree with every condition, the
// workload cluster's Nodes, the events and the actions offered.
type Detail struct {
	Summary    ClusterSummary `json:"summary"`
	Tree       *describe.Node `json:"tree"`
	Nodes      []NodeInfo     `json:"nodes"`
	NodesError string         `json:"nodesError"`
	Events     []EventInfo    `json:"events"`
	Actions    Actions        `json:"actions"`
	// Warnings are the objects that could not be read (most often for
	// lack of rights), so the tree shows them as missing.
	Warnings []string `json:"warnings"`
}

// NodeInfo is a workload cluster Node beside its Machine.
type NodeInfo struct {
	Name       string   `json:"name"`
	Machine    string   `json:"machine"`
	Ready      string   `json:"ready"`
	Version    string   `json:"version"`
	Roles      []string `json:"roles"`
	ProviderID string   `json:"providerID"`
}

// EventInfo is one event of the cluster's timeline.
type EventInfo struct {
	Time    string `json:"time"`
	Type    string `json:"type"`
	Reason  string `json:"reason"`
	Kind    string `json:"kind"`
	Name    string `json:"name"`
	Message string `json:"message"`
	Count   int32  `json:"count"`
}

// Actions are what the cluster view offers; the API server still decides
// with the user's rights.
type Actions struct {
	Scale          []ScaleTarget `json:"scale"`
	RolloutRestart []Target      `json:"rolloutRestart"`
	Pause          bool          `json:"pause"`
}

// Target names an object an action applies to; Kind is MachineDeployment
// or ControlPlane.
type Target struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
}

// ScaleTarget is a scalable object and its wanted replicas.
type ScaleTarget struct {
	Kind     string `json:"kind"`
	Name     string `json:"name"`
	Replicas int64  `json:"replicas"`
}

// Action kinds.
const (
	kindMachineDeployment = "MachineDeployment"
	kindControlPlane      = "ControlPlane"
)

// maxEvents bounds the timeline: the newest are kept.
const maxEvents = 200

func (s *Server) handleDetail(w http.ResponseWriter, r *http.Request) {
	d, status, err := s.detail(r.Context(), client.ObjectKey{Namespace: r.PathValue("namespace"), Name: r.PathValue("name")})
	if err != nil {
		writeError(w, status, err.Error())
		return
	}
	writeLargeJSON(w, r, d)
}

// detail reads one cluster's view. Core objects come from the cache,
// provider objects straight from the API server (and are followed from
// then on), Nodes from the workload cluster.
func (s *Server) detail(ctx context.Context, key client.ObjectKey) (*Detail, int, error) {
	d := &Detail{Nodes: []NodeInfo{}, Events: []EventInfo{}, Warnings: []string{}}
	readCtx, cancel := context.WithTimeout(ctx, cacheWait)
	defer cancel()
	objs, err := describe.Read(readCtx, routingReader{cached: s.cache, live: s.client}, s.client.RESTMapper(), key.Namespace, key.Name, func(what string, err error) {
		d.Warnings = append(d.Warnings, what+": "+err.Error())
	})
	if err != nil {
		var missing *describe.ClusterNotFoundError
		if errors.As(err, &missing) {
			return nil, http.StatusNotFound, err
		}
		return nil, statusOf(err), err
	}
	s.follow(objs)
	d.Summary = summarize(objs.Cluster)
	d.Tree = describe.Build(objs, describe.Options{ShowConditions: []string{"all"}, ShowMachineSets: true, Echo: true})
	d.Events = s.events(readCtx, objs)
	d.Actions = actionsOf(objs)
	nodes, err := s.nodes.list(ctx, s.client, key)
	if err != nil {
		d.NodesError = err.Error()
	}
	machineOf := map[string]string{}
	for _, m := range objs.Machines {
		if m.Status.NodeRef.Name != "" {
			machineOf[m.Status.NodeRef.Name] = m.Name
		}
	}
	for i := range nodes {
		d.Nodes = append(d.Nodes, nodeInfo(&nodes[i], machineOf))
	}
	return d, http.StatusOK, nil
}

func nodeInfo(n *corev1.Node, machineOf map[string]string) NodeInfo {
	info := NodeInfo{Name: n.Name, Machine: machineOf[n.Name], Ready: string(corev1.ConditionUnknown),
		Version: n.Status.NodeInfo.KubeletVersion, Roles: []string{}, ProviderID: n.Spec.ProviderID}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			info.Ready = string(c.Status)
		}
	}
	for label := range n.Labels {
		if role, ok := strings.CutPrefix(label, "node-role.kubernetes.io/"); ok && role != "" {
			info.Roles = append(info.Roles, role)
		}
	}
	slices.Sort(info.Roles)
	return info
}

// events are the cached events of the cluster's objects, oldest first.
func (s *Server) events(ctx context.Context, objs describe.Objects) []EventInfo {
	names := map[string]bool{"Cluster/" + objs.Cluster.Name: true}
	add := func(kind, name string) { names[kind+"/"+name] = true }
	for _, u := range []*unstructured.Unstructured{objs.Infrastructure, objs.ControlPlane} {
		if u != nil {
			add(u.GetKind(), u.GetName())
		}
	}
	for _, m := range objs.MachineDeployments {
		add("MachineDeployment", m.Name)
	}
	for _, m := range objs.MachineSets {
		add("MachineSet", m.Name)
	}
	for _, m := range objs.MachinePools {
		add("MachinePool", m.Name)
	}
	for _, m := range objs.Machines {
		add("Machine", m.Name)
	}
	for _, group := range []map[string]*unstructured.Unstructured{objs.InfrastructureMachines, objs.BootstrapConfigs, objs.InfrastructureMachinePools} {
		for _, u := range group {
			add(u.GetKind(), u.GetName())
		}
	}
	// A health check's verdict is an event about the Machine, which may be
	// gone by now (remediated); the event also names the check, which is
	// the cluster's, so the verdict stays in the timeline.
	checks := &clusterv1.MachineHealthCheckList{}
	if err := s.cache.List(ctx, checks, client.InNamespace(objs.Cluster.Namespace)); err == nil {
		for _, c := range checks.Items {
			if c.Spec.ClusterName == objs.Cluster.Name {
				add("MachineHealthCheck", c.Name)
			}
		}
	}
	list := &corev1.EventList{}
	if err := s.cache.List(ctx, list, client.InNamespace(objs.Cluster.Namespace)); err != nil {
		return []EventInfo{}
	}
	type timed struct {
		at time.Time
		EventInfo
	}
	var found []timed
	for i := range list.Items {
		e := &list.Items[i]
		related := e.Related != nil && names[e.Related.Kind+"/"+e.Related.Name]
		if !names[e.InvolvedObject.Kind+"/"+e.InvolvedObject.Name] && !related {
			continue
		}
		at := e.LastTimestamp.Time
		if at.IsZero() {
			at = e.EventTime.Time
		}
		if at.IsZero() {
			at = e.CreationTimestamp.Time
		}
		count := e.Count
		if count == 0 {
			count = 1
		}
		found = append(found, timed{at, EventInfo{Time: at.UTC().Format(time.RFC3339), Type: e.Type, Reason: e.Reason,
			Kind: e.InvolvedObject.Kind, Name: e.InvolvedObject.Name, Message: e.Message, Count: count}})
	}
	slices.SortStableFunc(found, func(a, b timed) int { return a.at.Compare(b.at) })
	if len(found) > maxEvents {
		found = found[len(found)-maxEvents:]
	}
	out := make([]EventInfo, 0, len(found))
	for _, t := range found {
		out = append(out, t.EventInfo)
	}
	return out
}

// actionsOf lists the objects the view offers to scale and restart.
func actionsOf(objs describe.Objects) Actions {
	a := Actions{Scale: []ScaleTarget{}, RolloutRestart: []Target{}, Pause: true}
	if cp := objs.ControlPlane; cp != nil {
		if replicas, found, _ := unstructured.NestedInt64(cp.Object, "spec", "replicas"); found {
			a.Scale = append(a.Scale, ScaleTarget{Kind: kindControlPlane, Name: cp.GetName(), Replicas: replicas})
		}
		if _, found, _ := unstructured.NestedFieldNoCopy(cp.Object, "spec", "rollout"); found || cp.GetKind() == "KubeadmControlPlane" {
			a.RolloutRestart = append(a.RolloutRestart, Target{Kind: kindControlPlane, Name: cp.GetName()})
		}
	}
	for _, md := range objs.MachineDeployments {
		var replicas int64
		if md.Spec.Replicas != nil {
			replicas = int64(*md.Spec.Replicas)
		}
		a.Scale = append(a.Scale, ScaleTarget{Kind: kindMachineDeployment, Name: md.Name, Replicas: replicas})
		a.RolloutRestart = append(a.RolloutRestart, Target{Kind: kindMachineDeployment, Name: md.Name})
	}
	return a
}

// follow starts watching the provider kinds among objs, so that their
// changes reach the cluster views too; the first view of a kind reads it
// from the API server, later ones are told when it changes.
func (s *Server) follow(objs describe.Objects) {
	var kinds []schema.GroupVersionKind
	note := func(u *unstructured.Unstructured) {
		if u != nil {
			kinds = append(kinds, u.GroupVersionKind())
		}
	}
	note(objs.Infrastructure)
	note(objs.ControlPlane)
	for _, group := range []map[string]*unstructured.Unstructured{objs.InfrastructureMachines, objs.BootstrapConfigs, objs.InfrastructureMachinePools} {
		for _, u := range group {
			note(u)
		}
	}
	s.providerMu.Lock()
	defer s.providerMu.Unlock()
	for _, gvk := range kinds {
		if s.watched[gvk.String()] || s.runCtx == nil {
			continue
		}
		s.watched[gvk.String()] = true
		inf, err := s.cache.GetInformerForKind(s.runCtx, gvk, cache.BlockUntilSynced(false))
		if err == nil {
			_, err = inf.AddEventHandler(s.changeHandler())
		}
		if err != nil {
			s.log.Info("Console cannot follow a provider kind", "kind", gvk.String(), "error", err.Error())
		}
	}
}

// routingReader reads the kinds the console follows from its cache and the
// rest (provider objects, CRDs) from the API server.
type routingReader struct {
	cached client.Reader
	live   client.Reader
}

func cachedKind(obj any) bool {
	switch obj.(type) {
	case *clusterv1.Cluster, *clusterv1.MachineDeployment, *clusterv1.MachineSet, *clusterv1.MachinePool, *clusterv1.Machine,
		*clusterv1.ClusterList, *clusterv1.MachineDeploymentList, *clusterv1.MachineSetList, *clusterv1.MachinePoolList, *clusterv1.MachineList,
		*corev1.EventList:
		return true
	}
	return false
}

func (r routingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if cachedKind(obj) {
		return r.cached.Get(ctx, key, obj, opts...)
	}
	return r.live.Get(ctx, key, obj, opts...)
}

func (r routingReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if cachedKind(list) {
		return r.cached.List(ctx, list, opts...)
	}
	return r.live.List(ctx, list, opts...)
}

// statusOf is the HTTP status an error from the API server stands for.
func statusOf(err error) int {
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Code != 0 {
		return int(status.Status().Code)
	}
	return http.StatusInternalServerError
}
