package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/contract"
	"capstan.dev/capstan/internal/patch"
	"capstan.dev/capstan/internal/workload"
)

// fieldOwner names the console in the managed fields of what it changes.
const fieldOwner = client.FieldOwner("capstan-console")

// maxBody bounds an action's JSON body.
const maxBody = 64 << 10

// actionError is a refusal with the HTTP status to answer it with.
type actionError struct {
	status int
	msg    string
}

func (e *actionError) Error() string { return e.msg }

func badRequest(format string, args ...any) error {
	return &actionError{status: http.StatusBadRequest, msg: fmt.Sprintf(format, args...)}
}

// act runs an action and answers {"ok":true} or the refusal, with the API
// server's status and message as they are.
func act(w http.ResponseWriter, r *http.Request, body any, do func(ctx context.Context, cluster client.ObjectKey) error) {
	if body != nil {
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
		dec.DisallowUnknownFields()
		if err := dec.Decode(body); err != nil {
			writeError(w, http.StatusBadRequest, "the request body is not the JSON this action takes: "+err.Error())
			return
		}
	}
	cluster := client.ObjectKey{Namespace: r.PathValue("namespace"), Name: r.PathValue("name")}
	if err := do(r.Context(), cluster); err != nil {
		var refused *actionError
		var status apierrors.APIStatus
		switch {
		case errors.As(err, &refused):
			writeError(w, refused.status, refused.msg)
		case errors.As(err, &status) && status.Status().Code != 0:
			writeError(w, int(status.Status().Code), status.Status().Message)
		default:
			writeError(w, http.StatusInternalServerError, err.Error())
		}
		return
	}
	writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
}

type scaleRequest struct {
	Kind     string `json:"kind"`
	Name     string `json:"name"`
	Replicas *int32 `json:"replicas"`
}

type targetRequest struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
}

func (s *Server) handleScale(w http.ResponseWriter, r *http.Request) {
	req := &scaleRequest{}
	act(w, r, req, func(ctx context.Context, key client.ObjectKey) error {
		if req.Replicas == nil || *req.Replicas < 0 {
			return badRequest("replicas: give the number of replicas wanted, 0 or more")
		}
		return s.changeTarget(ctx, key, req.Kind, req.Name, edit{replicas: req.Replicas})
	})
}

func (s *Server) handleRolloutRestart(w http.ResponseWriter, r *http.Request) {
	req := &targetRequest{}
	act(w, r, req, func(ctx context.Context, key client.ObjectKey) error {
		now := metav1.NewTime(time.Now().UTC().Truncate(time.Second))
		return s.changeTarget(ctx, key, req.Kind, req.Name, edit{restartAt: &now})
	})
}

func (s *Server) handlePause(w http.ResponseWriter, r *http.Request) {
	req := &struct {
		Paused *bool `json:"paused"`
	}{}
	act(w, r, req, func(ctx context.Context, key client.ObjectKey) error {
		if req.Paused == nil {
			return badRequest("paused: give true to pause the Cluster or false to resume it")
		}
		c := &clusterv1.Cluster{}
		if err := s.client.Get(ctx, key, c); err != nil {
			return err
		}
		if ptr.Deref(c.Spec.Paused, false) == *req.Paused {
			return nil // already so: no write
		}
		var value any // false removes the field, as kubectl users expect
		if *req.Paused {
			value = true
		}
		return s.mergePatch(ctx, c, map[string]any{"spec": map[string]any{"paused": value}})
	})
}

func (s *Server) handleKubeconfig(w http.ResponseWriter, r *http.Request) {
	key := client.ObjectKey{Namespace: r.PathValue("namespace"), Name: r.PathValue("name")}
	secret, err := kubeconfigSecret(r.Context(), s.client, key)
	if err != nil {
		writeError(w, statusOf(err), err.Error())
		return
	}
	data := secret.Data[workload.KubeconfigDataKey]
	if len(data) == 0 {
		writeError(w, http.StatusNotFound, fmt.Sprintf("Secret %s/%s has no %q key", secret.Namespace, secret.Name, workload.KubeconfigDataKey))
		return
	}
	w.Header().Set("Content-Type", "application/yaml")
	w.Header().Set("Content-Disposition", "attachment; filename="+strconv.Quote(key.Name+".kubeconfig"))
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(data)
}

// edit is what an action changes: the replicas, or spec.rollout.after.
type edit struct {
	replicas  *int32
	restartAt *metav1.Time
}

// specPatch is the merge patch of spec that makes e.
func (e edit) specPatch() map[string]any {
	if e.replicas != nil {
		return map[string]any{"replicas": *e.replicas}
	}
	return map[string]any{"rollout": map[string]any{"after": e.restartAt.UTC().Format(time.RFC3339)}}
}

// changeTarget makes e on a MachineDeployment or on the control plane of
// the cluster. A Cluster with a topology is changed through it instead:
// the topology controller would put the object back otherwise.
func (s *Server) changeTarget(ctx context.Context, key client.ObjectKey, kind, name string, e edit) error {
	if kind != kindMachineDeployment && kind != kindControlPlane {
		return badRequest("kind %q: use %s or %s", kind, kindMachineDeployment, kindControlPlane)
	}
	c := &clusterv1.Cluster{}
	if err := s.client.Get(ctx, key, c); err != nil {
		return err
	}
	if kind == kindControlPlane {
		ref := c.Spec.ControlPlaneRef
		if name != "" && name != ref.Name {
			return badRequest("Cluster %s has no control plane named %q", key, name)
		}
		if c.Spec.Topology.IsDefined() {
			return s.changeTopology(ctx, c, func(t *clusterv1.Topology) bool {
				e.applyTo(&t.ControlPlane.Replicas, &t.ControlPlane.Rollout.After)
				return true
			})
		}
		if ref.Name == "" {
			return badRequest("Cluster %s has no control plane", key)
		}
		cp, err := (&contract.Resolver{Reader: s.client}).Get(ctx, s.client, ref, key.Namespace)
		if err != nil {
			return err
		}
		if current, found, _ := unstructured.NestedInt64(cp.Object, "spec", "replicas"); e.replicas != nil && found && current == int64(*e.replicas) {
			return nil // already so: no write
		}
		return s.mergePatch(ctx, cp, map[string]any{"spec": e.specPatch()})
	}
	md := &clusterv1.MachineDeployment{}
	if err := s.client.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: name}, md); err != nil {
		return err
	}
	if md.Labels[clusterv1.ClusterNameLabel] != key.Name {
		return badRequest("MachineDeployment %s/%s does not belong to Cluster %s", key.Namespace, name, key.Name)
	}
	if topologyName := md.Labels[clusterv1.ClusterTopologyMachineDeploymentNameLabel]; topologyName != "" && c.Spec.Topology.IsDefined() {
		return s.changeTopology(ctx, c, func(t *clusterv1.Topology) bool {
			for i := range t.Workers.MachineDeployments {
				if w := &t.Workers.MachineDeployments[i]; w.Name == topologyName {
					e.applyTo(&w.Replicas, &w.Rollout.After)
					return true
				}
			}
			return false
		})
	}
	if e.replicas != nil && md.Spec.Replicas != nil && *md.Spec.Replicas == *e.replicas {
		return nil
	}
	return s.mergePatch(ctx, md, map[string]any{"spec": e.specPatch()})
}

func (e edit) applyTo(replicas **int32, after *metav1.Time) {
	if e.replicas != nil {
		*replicas = ptr.To(*e.replicas)
	}
	if e.restartAt != nil {
		*after = *e.restartAt
	}
}

// changeTopology edits the Cluster's topology and writes it back when it
// changed, refusing to land on a topology changed meanwhile (the workers
// list is replaced as a whole by a merge patch).
func (s *Server) changeTopology(ctx context.Context, c *clusterv1.Cluster, change func(*clusterv1.Topology) bool) error {
	original := c.DeepCopy()
	if !change(&c.Spec.Topology) {
		return badRequest("the MachineDeployment is not in Cluster %s's topology any more", c.Name)
	}
	if equality.Semantic.DeepEqual(original.Spec, c.Spec) {
		return nil
	}
	return s.client.Patch(ctx, c, client.MergeFromWithOptions(original, client.MergeFromWithOptimisticLock{}), fieldOwner)
}

func (s *Server) mergePatch(ctx context.Context, obj client.Object, doc map[string]any) error {
	return s.client.Patch(ctx, obj, patch.Merge(doc), fieldOwner)
}
