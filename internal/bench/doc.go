// Package bench measures what Capstan's controllers cost at scale: it
// creates N clusters of one KubeadmControlPlane machine and M
// MachineDeployment workers on the in-memory provider, all at once, waits
// until every Machine is Running, and reports the time to 50/90/100%
// Running, the API server's own count of writes per Machine by verb and
// resource and of 409 Conflicts, the manager's CPU seconds and peak RSS,
// and the objects each cluster costs. `capstan bench scale` prints it; the
// package's test guards the writes per Machine.
//
// The management plane is the capstan binary's embedded kube-apiserver and
// etcd in a child process (`capstan up --controllers=false`), so that the
// figures of this process are the manager's: every controller and the
// in-memory provider with its simulated workload clusters.
package bench
