// Package kubeadmcontrolplane reconciles KubeadmControlPlanes: it keeps a
// workload cluster's control plane at the requested number of kubeadm
// Machines, at the requested version and configuration.
//
// A reconcile gathers everything first — the owning Cluster, the cluster
// certificates, the control plane's Machines with their KubeadmConfigs, and,
// once the cluster is initialized, its etcd members and the health of each
// Machine's components (read from their mirror Pods in the workload
// cluster) — and hands it to plan.DecideControlPlane, which picks one step:
// create the first Machine (kubeadm init), add one (kubeadm join), remove
// one, or wait and say why. Membership changes one Machine at a time, and a
// removal never leaves etcd without a healthy majority.
//
// etcd is reached only through the workload cluster's API server: a
// port-forward to each member's static Pod kube-system/etcd-<node>, port
// 2379, carrying TLS to the member with a client certificate from the
// cluster's etcd CA; one client per member, so that each member's health
// and leadership are its own answers. Each API server's serving
// certificate, whose expiry the rollout watches, is read the same way
// (kube-apiserver-<node> on kubeadm's bind port). Node addresses, and the
// addresses the static Pods advertise, are never dialled: a management
// cluster elsewhere cannot route to them.
//
// A removed Machine keeps a pre-terminate hook until its etcd member is gone:
// when the Machine is drained and waits at the hook, the controller asks the
// machine to leave the control-plane load balancer (the Node annotation of
// docs/local-provider.md; machines of other providers simply do not answer
// and the controller goes on after a short wait), moves etcd leadership off
// it, removes its member, and lifts the hook.
package kubeadmcontrolplane
