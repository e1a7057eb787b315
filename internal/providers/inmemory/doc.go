// Package inmemory is Capstan's in-memory infrastructure provider
// (InMemoryCluster, InMemoryMachine, and InMemoryMachinePool, whose
// instances are InMemoryMachines made through internal/providers/pool):
// simulated machines for scale tests and benchmarks, thousands per host,
// that the rest of Capstan cannot tell from real ones.
//
// # Why a light API server per cluster
//
// The core must reach each simulated cluster exactly as it reaches a real
// one: through the <cluster>-kubeconfig Secret, internal/workload's cached
// clients and informers, and internal/etcdclient. So every simulated
// cluster gets, inside the provider's process:
//
//   - one HTTPS listener on 127.0.0.1 (its control-plane endpoint) serving
//     enough of the Kubernetes REST API for what Capstan's controllers and
//     kubectl do: discovery, get, list and watch (resumable from a
//     resourceVersion, and the watch-list stream informers open first),
//     create, update, merge / JSON / strategic-merge patch, apply, delete,
//     the status subresource, Pod eviction and port-forward (SPDY, served
//     by the kubelet's own streaming code), over a small in-memory store
//     with one resourceVersion counter and optimistic concurrency. Its
//     serving certificate is issued from the cluster's own CA (the
//     <cluster>-ca Secret, read when the first client connects), and a
//     client certificate from that CA is required (without one, 401 but
//     for /healthz, /livez, /readyz and /version), so the kubeconfig
//     KubeadmControlPlane writes verifies and works unchanged;
//   - one gRPC endpoint per control-plane machine answering etcd's Cluster
//     and Maintenance services (MemberList, Status, MoveLeader,
//     MemberRemove, Alarm) from the simulated membership, over TLS with a
//     certificate from the cluster's etcd CA, requiring client certificates
//     from it. It listens on no port: a port-forward to the member's Pod
//     kube-system/etcd-<node>, port 2379, through the cluster's API server
//     is the only way in, as on a cloud and in Cluster API's in-memory
//     provider, and how KubeadmControlPlane reaches it;
//   - a simulated kubelet per machine: after the machine's delay its Node
//     registers Ready with the machine's providerID (so the Machine
//     controller finds it and sets nodeRef); on control-plane machines the
//     etcd member and the Ready static Pods (kube-apiserver,
//     kube-controller-manager, kube-scheduler, etcd, with kubeadm's
//     annotations for the etcd client URL and the API server endpoint)
//     follow, and the first one writes kubeadm's kubeadm-config ConfigMap,
//     which KubeadmControlPlane takes as "initialized".
//
// The alternatives were worse for the purpose. One real kube-apiserver per
// simulated cluster costs tens of MiB and seconds each, so a thousand would
// not fit on one host. A fake client injected into the controllers would
// skip exactly what is measured: the kubeconfig, the connection cache, the
// informers and the etcd client. client-go's ObjectTracker keeps no
// resourceVersions and cannot resume a watch, which informers need; a store
// of a few hundred lines can. One listener per cluster (rather than one
// shared listener routed by SNI) keeps each cluster's kubeconfig a plain
// host:port and lets a deleted cluster's port close for good.
//
// Simplifications, none of which the core relies on: there is no
// authorization (any certificate from the cluster CA is an administrator);
// apply is served as a strategic merge of the applied fields, without field
// ownership; eviction ignores disruption budgets; nothing is garbage
// collected by owner; and the simulation lives in memory, so a restarted
// manager boots each provisioned machine again (its Node, Pods and etcd
// member come back after the usual delays).
//
// # Delays
//
// Each machine's start-up has stages with simulated delays: machine (boot,
// until provisioned), then node (Node Ready), then on control-plane
// machines API server and etcd (their Pods Ready, counted from the Node).
// Defaults are 10s, 2s, 2s and 2s with ±20% jitter; Options.Delays,
// InMemoryCluster spec.delays and InMemoryMachine spec.delays override
// field by field (the machine's own first). Zero makes a stage instant.
// The machine stage is a computed requeue, the others timers: nothing
// polls.
//
// # Deletion
//
// Deleting an InMemoryMachine removes its Node, its Pods and etcd member
// (closing the member's endpoint) and its pending timers; deleting an
// InMemoryCluster closes its listener, ends every watch and drops its
// objects. Nothing outlives them.
package inmemory
