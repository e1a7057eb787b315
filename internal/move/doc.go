// Package move moves the Cluster API objects of workload clusters from one
// management cluster to another, or to a directory of YAML files and back,
// without losing any: what `capstan move` runs.
//
// A move discovers the graph of every Cluster in a namespace (or all): the
// objects of every kind whose CRD carries a Cluster API contract or
// provider label that belong to a Cluster through owner references, the
// cluster-name label, or a reference in a graph object's spec; the
// Secrets and ConfigMaps they own or that are named like the cluster's
// secrets; and every object labelled clusterctl.cluster.x-k8s.io/move
// (or of a kind whose CRD is labelled move or move-hierarchy) with all it
// owns. It then pauses the Clusters, creates the objects in the target in
// owner order (Order, a pure function) with owner references re-pointed at
// the target's UIDs and status copied, checks every copy against its
// source, deletes the sources without their finalizers, and unpauses the
// Clusters in the target.
//
// Resuming: a move keeps its journal on the objects themselves, so running
// the same move again after an interruption continues where it stopped.
//   - A Cluster that the move paused carries the annotation
//     move.capstan.dev/paused: the annotation is copied with the Cluster,
//     and the last step unpauses every Cluster in the target that has it
//     (and removes it). A Cluster a user had paused before is left paused.
//   - Every copy carries move.capstan.dev/source-uid, the UID of the object
//     it was copied from, so an object already in the target is recognised
//     (or, failing that, accepted when its spec, labels and annotations
//     equal the source's) and never created twice; its status is copied
//     again in case the first run stopped between create and status.
//   - Deleting runs from the leaves up, so a source interrupted halfway
//     still holds the owners of what was deleted, and their copies are in
//     the target already.
//
// The move.capstan.dev/ annotations are ignored when copies are compared.
package move
