// Package agent is a Capstan local machine: the process `capstan node run`
// runs for one machine directory (docs/local-provider.md).
//
// It plays the parts a cloud VM's operating system would: it takes the
// machine's lock, boots from the bootstrap data with the cloudinit package
// (files re-rooted under DIR/rootfs), and performs the kubeadm commands in
// it itself. `kubeadm init` starts a real etcd and control plane
// (internal/node/controlplane) and leaves behind, in the new cluster, what
// kubeadm would (kubeadm-config, cluster-info, bootstrap-token RBAC);
// `kubeadm join` discovers the cluster with the bootstrap token, checks its
// CA against the pinned hashes, and either TLS-bootstraps a worker's
// kubelet or, for a control-plane join, adds an etcd member and starts
// another control plane. Every machine then runs the simulated kubelet
// (internal/node/kubelet).
//
// What the machine became (role, ports, etcd cluster, the kubeadm
// configuration it used) is kept under rootfs/var/lib/capstan, so a
// restarted process — a rebooted machine — starts the same components
// again instead of initialising anew; the cloud-init journal makes the
// bootstrap itself a no-op the second time.
//
// The agent reports to the manager through DIR/status.json (phase changes,
// written atomically) and DIR/apiserver-endpoint (present while this
// machine's API server is ready and not leaving the load balancer). The
// directory's files, their types and the lock are package machinedir's,
// which the manager uses too.
//
// The kubeadm side — init, join, the restart and the running components —
// works on the machine's root directory, DIR/rootfs, and reports through
// a Reporter, which `capstan node run` points at the machine directory.
package agent
