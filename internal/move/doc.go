// Package move moves the Cluster API objects of workload clusters from one
// management cluster to another, or to a directory of YAML files and back,
// without losing any: what `capstan move` runs.
//
// A move discovers the graph of every Cluster in a namespace (or all): the
// objects of every kind whose CRD carries a Cluster API contract or
// provider label that belong to a Cluster through owner references, the
// cluster-name label, or a reference in a graph object's spec (templates,
// the ClusterClass); the Secrets and ConfigMaps they own or that are named
// like the cluster's secrets or bootstrap data; and every object labelled
// clusterctl.cluster.x-k8s.io/move (or of a kind whose CRD is labelled
// move or move-hierarchy) with all it owns.
//
// Cluster-scoped ("global") objects, of kinds whose CRD carries one of
// those labels, move only when selected: labelled clusterctl.cluster.x-k8s.io/move,
// of a kind whose CRD is labelled move or move-hierarchy, or owned by such
// an object (Kubernetes lets a cluster-scoped object have only
// cluster-scoped owners; Order refuses anything else). Which of them a
// namespace's clusters use cannot be told (namespaced objects name them by
// name only, in provider-specific fields), so a --namespace move copies
// every selected global object. They are created first in their batch,
// recognised on a resumed run and verified like every other object, but
// never deleted from the source, nor paused there, and neither is what
// they own: other clusters and namespaces of the source may share them
// (identities, for example). clusterctl's provider contract documents the
// same for global kinds labelled for move: copied to the target, left in
// the source for the user to remove. A global object changed in the source
// after an earlier move no longer matches its copy: the move then stops at
// verifying, before deleting anything, naming the difference.
//
// Before it changes anything in the source, a move checks the target with
// the objects it found: a cluster target must serve every kind, take the
// namespaces (created then), hold no other object of a name the move needs,
// and accept every object in a server-side dry run (validation, admission,
// authorization); a directory must be made and take a probe file. A target
// that fails leaves the source as it was, not paused.
//
// Then it waits until no object of the graph is being deleted, pauses the
// Clusters (spec.paused) and every object that reports a Paused condition
// (with the cluster.x-k8s.io/paused annotation, which wakes its
// controller), and waits until the controllers report them Paused. It
// creates the objects in the target in owner order (Order, a pure
// function) with owner references re-pointed at the target's UIDs and
// status copied (so the target's controllers adopt what exists: Machines
// keep their nodeRef, LocalMachines their running process), checks every
// copy's spec, labels and annotations against its source, deletes the
// sources leaves first after removing their finalizers (no controller of
// the source acts on the deletion), and unpauses in the target.
//
// Resuming: a move keeps its journal on the objects themselves, so running
// the same move again after an interruption continues where it stopped.
//
//   - A Cluster or object that the move paused carries the annotation
//     move.capstan.dev/paused. It is copied with the object; the last step
//     unpauses every object in the target that has it (the paused
//     annotation first, the Clusters' spec.paused last) and removes it.
//     What a user had paused before the move stays paused.
//
//   - Every copy carries move.capstan.dev/source-uid, the UID of the object
//     it was copied from, so an object already in the target is recognised
//     (or, failing that, accepted when its spec, labels and annotations
//     equal the source's) and never created twice; its status is copied
//     again in case the first run stopped between create and status.
//
//   - Deleting runs from the leaves up, so a source interrupted halfway
//     still holds the owners of what was deleted, and their copies are in
//     the target already; Order accepts owners found only in the target.
//
//   - A directory holds one file per object, written atomically, named
//     <batch>_<group>_<kind>_<namespace>_<name>.yaml; a file of an object is
//     rewritten, never duplicated, by a resumed run.
//
//   - Before its first deletion a move marks the roots of the graph in the
//     source (what no object of the graph owns: Clusters, templates and
//     classes found only through a spec's reference) with
//     move.capstan.dev/deleting: a resumed move finds them, and what they
//     own, even after what referenced them was deleted. Until then an
//     undo (the Undo functions,
//     `capstan move --undo`) can restore the source: it removes the copies
//     that record a source object's UID (not cluster-scoped ones, which
//     the target may share) and unpauses what the move paused. Once
//     marked, only finishing the move is possible, and the undo says so.
//
// A move that stops returns an Error that says what it changed so far and
// whether an undo can still restore the source.
//
// The move.capstan.dev/ annotations are ignored when copies are compared.
package move
