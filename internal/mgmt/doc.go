// Package mgmt runs Capstan's embedded management plane: a real etcd and a
// real kube-apiserver inside the capstan process, with the few
// kube-controller-manager controllers a management cluster cannot do
// without (namespace deletion, owner-reference garbage collection, service
// accounts), Capstan's CRDs installed and Established, and an admin
// kubeconfig written into a state directory.
//
// A state directory belongs to one running instance at a time (an flock on
// its lock file, released by the kernel even when the process is killed), and
// holds everything that must survive a restart: the etcd data, the PKI, the
// loopback ports chosen on first start, and the kubeconfig. Starting again
// over the same directory keeps every object.
package mgmt
