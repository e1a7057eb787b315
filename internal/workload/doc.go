// Package workload gives Capstan's controllers access to workload clusters:
// the clusters a Cluster object describes, reached through the admin
// kubeconfig in the management cluster's Secret <cluster>-kubeconfig (key
// "value", same namespace as the Cluster; the Cluster API contract).
//
// One ClusterCache serves every controller of a manager. Per workload cluster
// it holds at most one connection, built on first use from the Secret and
// kept until the cluster is deleted, stops answering, or its kubeconfig
// changes:
//
//   - GetClient returns a client whose reads of watched kinds come from an
//     informer cache in that cluster and whose other reads and all writes go to
//     its API server. GetReader never uses the cache (lists by field selector,
//     such as a drain's Pods by spec.nodeName). GetRESTConfig returns the
//     connection's rest.Config for anything else.
//   - Watch starts an informer for a kind (once per watch name and
//     connection) and feeds its events to a controller through an
//     EventHandler, e.g. Node events mapped to Machine requests.
//   - A health probe (GET / every ProbeInterval, at most ProbeTimeout, one
//     attempt, its error named: connection refused, timeout, closed, TLS)
//     checks each connected cluster. From the first failed probe until one
//     succeeds, GetClient, GetReader, GetRESTConfig and Watch refuse with an
//     Unreachable NotConnectedError: the informers would serve what the
//     cluster said before it went silent, and controllers would report it
//     as current. After FailureThreshold failures in a row the connection
//     is closed (informers, watches, idle connections); the probe loop then
//     keeps asking the cluster, and the first time it answers the next
//     GetClient connects at once. Health reports the state for the
//     Cluster's RemoteConnectionProbe condition; HealthChanges /
//     HealthSource tell controllers when a cluster connects, stops
//     answering, answers again or is disconnected, so nobody polls.
//   - Disconnect closes and forgets a cluster; call it when the Cluster is
//     deleted.
//
// Wiring, in the manager:
//
//	cc, err := workload.New(mgr.GetClient(), workload.Options{Scheme: mgr.GetScheme()})
//	if err != nil { ... }
//	if err := mgr.Add(cc); err != nil { ... } // runs probes; closes all on stop
//
// In a reconciler (here the Machine controller, whose controller c was kept
// from the builder's Build):
//
//	err := r.Clusters.Watch(ctx, clusterKey, workload.WatchInput{
//		Name:    "machine/nodes",
//		Watcher: r.controller,
//		Kind:    &corev1.Node{},
//		Handler: handler.EnqueueRequestsFromMapFunc(r.nodeToMachine),
//	})
//	if errors.Is(err, workload.ErrClusterNotConnected) {
//		// Record the error's message in a condition and requeue later.
//	}
//	remote, err := r.Clusters.GetClient(ctx, clusterKey)
//	node := &corev1.Node{}
//	err = remote.Get(ctx, client.ObjectKey{Name: nodeName}, node) // from the cache
//
// Call Watch on every reconcile that relies on it: it is cheap when the watch
// exists and re-creates it after a reconnect. Errors that mean "no usable
// connection" match ErrClusterNotConnected and carry a NotConnectedError whose
// Reason and Message say whether the kubeconfig is missing, invalid, or the
// cluster unreachable, and what to do; no message contains credentials.
//
// The ClusterCache keeps no global state, is safe for concurrent use, and
// leaves nothing running once Disconnect returns (for one cluster) or Start
// returns (for all).
package workload
