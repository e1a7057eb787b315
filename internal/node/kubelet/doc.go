// Package kubelet is the simulated kubelet of a Capstan local machine: it
// makes a machine process look like a real Kubernetes node to the workload
// cluster's API server, so that Cluster API's controllers (Machine node
// references, drain, MachineHealthCheck, KubeadmControlPlane's etcd and
// control-plane checks) see what they would see on a cloud VM. It runs no
// containers, except Capstan's own (below).
//
// Bootstrap performs the kubelet's TLS bootstrap: with the bootstrap token's
// credentials it submits a CertificateSigningRequest for
// system:node:<name> (signer kubernetes.io/kube-apiserver-client-kubelet),
// waits for the cluster to approve and sign it, keeps the key pair in the
// certificate directory and returns the node's own credentials. A pair
// already there, for the same node and valid for more than a day, is reused.
//
// Run is the kubelet itself, acting with the node's credentials only, so it
// stays within what the Node authorizer and the NodeRestriction admission
// plugin let a real kubelet do:
//
//   - It registers the Node (or adopts an existing one, setting its
//     providerID only if empty, since that field is immutable once set).
//     Labels and taints are set at registration only, as a kubelet does.
//     Labels a node may not set on itself (node-role.kubernetes.io/... and
//     any other kubernetes.io or k8s.io label that is not a kubelet label)
//     are applied afterwards with Options.LabelsClient, the way kubeadm's
//     mark-control-plane phase applies them with administrator credentials;
//     without LabelsClient they are tried with the node's own credentials,
//     which only an API server without NodeRestriction accepts (refused,
//     they are left out with one logged error, as the refusal is final).
//   - Heartbeats: the Lease kube-node-lease/<node> is renewed every
//     HeartbeatInterval; the Node's conditions are re-written every four
//     intervals, or at once when they differ from what the node reports.
//     When Run's context ends the heartbeats stop and the Node stays: the
//     node lifecycle controller marks it NotReady, as for a stopped VM.
//   - Pods bound to the node "run" at once: their status becomes Running
//     and Ready with an IP from the node's own /24 in 10.244.0.0/16 (the
//     host's address for host-network pods). Containers never exit, so a
//     pod with restartPolicy Never or OnFailure runs until deleted. A pod
//     being deleted (including by eviction) is confirmed at once by a
//     delete with grace period 0, preconditioned on its UID.
//   - One Pod runs for real when Options.RootDir is set, so Capstan
//     installed into a workload cluster (`capstan init --infrastructure
//     local`) really manages: its manager exactly as installed for
//     Options.LocalDir (deploy.CheckLocalManagerPod: namespace, owning
//     ReplicaSet, service account, the one container, its arguments, no
//     command, environment or working directory). Its container is a
//     process of this executable (the capstan binary) with the installed
//     arguments and an environment of PATH, HOME (the pod's directory),
//     KUBECONFIG, POD_NAMESPACE and POD_NAME; nothing else of the host's.
//     Any other Pod with a container of Capstan's image
//     (deploy.IsCapstanImage) stays Pending, its containers waiting with
//     reason HostProcessRefused and a message naming what differs, and
//     nothing runs. The kubeconfig, in
//     RootDir/var/lib/kubelet/pods/<uid>/ beside the process's working
//     directory and <container>.log, names the node's API server endpoint
//     and CA and a token file holding a service-account token the node
//     requested bound to the pod (renewed at 4/5 of its hour). Exited
//     processes restart per restartPolicy with the kubelet's back-off (10s
//     doubling to 5m); the status reports Running and Ready only while the
//     process runs, restartCount and the last termination honestly, and
//     Succeeded/Failed when nothing restarts. Probes are not run. Deleting
//     the pod, or stopping the node, stops the processes (SIGTERM, SIGKILL
//     after terminationGracePeriodSeconds) before the deletion is confirmed;
//     the processes share the machine's process group and die with it.
//   - Static pods: each Options.StaticPods entry has a mirror Pod
//     kube-system/<component>-<node>, owned by the Node, re-created when
//     deleted, whose Ready condition follows the entry's Healthy check,
//     re-evaluated every heartbeat.
//   - The kubelet API, with Options.Server: HTTPS on Options.Address (a
//     loopback address; the port is reported in the Node's
//     status.daemonEndpoints), serving /portForward/{namespace}/{pod} as a
//     kubelet does for the API server's pods/portforward (SPDY with the
//     portforward.k8s.io protocol; the kubelet's own streaming code). A
//     caller must present a client certificate from Options.Server.ClientCAs
//     and be allowed the Node's nodes/proxy subresource, which the kubelet
//     asks the API server with a SubjectAccessReview (answers reused for
//     minutes), as in webhook authorization mode. Only ports a static Pod
//     maps (StaticPod.Ports, e.g. etcd's 2379 to the member's client port)
//     can be forwarded: that is how KubeadmControlPlane reaches etcd.
//   - Leaving the load balancer: when the Node is annotated
//     capstan.dev/leave-load-balancer="true", Options.OnLeave runs and the
//     node answers with capstan.dev/left-load-balancer="true".
//
// Every write is skipped when the object already says what it would write.
package kubelet
