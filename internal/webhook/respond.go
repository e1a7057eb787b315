package webhook

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/conditions"
	"capstan.dev/capstan/internal/index"
)

var (
	clusterKind      = clusterv1.GroupVersion.WithKind("Cluster").GroupKind()
	clusterClassKind = clusterv1.GroupVersion.WithKind(clusterv1.ClusterClassKind).GroupKind()
)

// refuse turns err into a refusal that keeps the API status of err (its
// field causes, its code) when it has one.
func refuse(err error, warnings ...string) admission.Response {
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		status := st.Status()
		return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Allowed: false, Result: &status, Warnings: warnings}}
	}
	return admission.Denied(err.Error()).WithWarnings(warnings...)
}

// classWait bounds how long a webhook waits for a ClusterClass to show up
// in the cache or to be reconciled: a class applied together with its
// Clusters (one kubectl apply) is usually there a moment later.
const classWait = 2 * time.Second

// classState is what a webhook learnt about a Cluster's class.
type classState int

const (
	classReady       classState = iota // found, reconciled at its generation, variables ready
	classNotFound                      // no such class
	classNotReconcil                   // found, but its status does not describe its spec yet
)

// class reads the ClusterClass key names from the cache, waiting up to
// classWait for it to exist and be reconciled. The class is returned unless
// it does not exist.
func (s *Server) class(ctx context.Context, key types.NamespacedName) (*clusterv1.ClusterClass, classState, error) {
	cc := &clusterv1.ClusterClass{}
	state := classNotFound
	var readErr error
	_ = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, classWait, true, func(ctx context.Context) (bool, error) {
		readErr = s.client.Get(ctx, key, cc)
		if apierrors.IsNotFound(readErr) {
			// The cache may not hold it (a filtered cache, or a class
			// created a moment ago).
			readErr = s.live.Get(ctx, key, cc)
		}
		switch {
		case apierrors.IsNotFound(readErr):
			state, readErr = classNotFound, nil
			return false, nil
		case readErr != nil:
			return false, nil
		case !reconciled(cc):
			state = classNotReconcil
			return false, nil
		}
		state = classReady
		return true, nil
	})
	if readErr != nil {
		return nil, state, fmt.Errorf("reading ClusterClass %s: %w", key, readErr)
	}
	if state == classNotFound {
		return nil, state, nil
	}
	return cc, state, nil
}

// reconciled tells whether the class's status.variables describe its spec:
// the controller has seen this generation and found its variables valid.
func reconciled(cc *clusterv1.ClusterClass) bool {
	return cc.Status.ObservedGeneration == cc.Generation && conditions.IsTrue(cc, clusterv1.ClusterClassVariablesReadyCondition)
}

// classWarning explains to the user why their Cluster was not checked
// against its class.
func classWarning(key types.NamespacedName, state classState) string {
	if state == classNotFound {
		return fmt.Sprintf("ClusterClass %s does not exist: the topology was not checked against it; the Cluster waits (TopologyReconciled=False, ClusterClassNotReconciled) until it is created", key)
	}
	return fmt.Sprintf("ClusterClass %s has not been reconciled yet or its variables are not valid (see its VariablesReady condition): the topology's variables were neither defaulted nor checked", key)
}

// clustersUsing lists the Clusters built from cc, in every namespace,
// sorted by namespace and name.
func (s *Server) clustersUsing(ctx context.Context, cc *clusterv1.ClusterClass) ([]clusterv1.Cluster, error) {
	list := &clusterv1.ClusterList{}
	var err error
	if s.opts.FilteredCache {
		err = s.live.List(ctx, list)
	} else {
		err = s.client.List(ctx, list, index.UsingClass(cc.Namespace, cc.Name))
	}
	if err != nil {
		return nil, fmt.Errorf("listing the Clusters that use ClusterClass %s/%s: %w", cc.Namespace, cc.Name, err)
	}
	key := types.NamespacedName{Namespace: cc.Namespace, Name: cc.Name}
	var items []clusterv1.Cluster
	for _, c := range list.Items {
		if c.GetClassKey() == key {
			items = append(items, c)
		}
	}
	sort.Slice(items, func(i, j int) bool {
		return client.ObjectKeyFromObject(&items[i]).String() < client.ObjectKeyFromObject(&items[j]).String()
	})
	return items, nil
}

// maxNamed is how many Clusters a message names before it counts the rest.
const maxNamed = 5

// clusterNames names Clusters for a message: namespace/name, a few, then a
// count.
func clusterNames(clusters []*clusterv1.Cluster) string {
	names := make([]string, 0, maxNamed)
	for i, c := range clusters {
		if i == maxNamed {
			names = append(names, fmt.Sprintf("and %d more", len(clusters)-maxNamed))
			break
		}
		names = append(names, c.Namespace+"/"+c.Name)
	}
	return strings.Join(names, ", ")
}
