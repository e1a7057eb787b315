// Package drain cordons and drains a workload cluster's Node the way the
// Machine controller must before it deletes a Machine: mark the node
// unschedulable, evict the pods that should move elsewhere through the
// policy/v1 Eviction API (so PodDisruptionBudgets are respected), and then
// wait for the node's volumes to detach.
//
// Nothing here blocks. The Machine reconciler calls Cordon and Drain once per
// reconcile and requeues until Result.Done; it records when draining began
// and gives up through TimeoutPassed, and it puts Result.Message into the
// Machine's Deleting condition. VolumesDetached is the next step's check.
//
// Which pods are evicted is decided by Classify, a pure function over the
// observed pods: mirror (static) pods, pods of existing DaemonSets, completed
// pods and pods labelled cluster.x-k8s.io/drain=skip are left alone; pods
// labelled cluster.x-k8s.io/drain=wait-completed are waited for but not
// evicted; Rules may skip pods, wait for them, or order evictions in
// batches. RulesForMachine makes the Rules of a Machine from the
// MachineDrainRules of its namespace, and Result.Details names the rule or
// label that keeps each pod waiting.
//
// Drain lists pods with the field selector spec.nodeName. Pass it an
// uncached reader, or a controller-runtime cache on which IndexPodsByNode has
// been registered: a cache without that index cannot answer the list.
package drain
