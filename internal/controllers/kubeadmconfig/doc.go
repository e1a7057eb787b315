// Package kubeadmconfig is the kubeadm bootstrap provider: it turns each
// KubeadmConfig owned by a Machine into the Machine's bootstrap data, a
// cloud-config Secret that runs "kubeadm init" on the one control plane
// Machine that initializes the cluster and "kubeadm join" on every other.
//
// The first control plane Machine takes the cluster's init lock (ConfigMap
// <cluster>-lock; not needed, and not taken, by Machines of a
// KubeadmControlPlane, which makes its first Machine alone), gets the
// cluster certificates (generated when the user supplied none) and, for a
// control plane of bare Machines, the admin kubeconfig. Other Machines wait
// for the Cluster to report its control plane initialized, then join with a
// bootstrap token the controller creates in the workload cluster, keeps
// with the bootstrap data, and keeps alive until their Node exists.
// Layout and file formats are those of docs/local-provider.md.
package kubeadmconfig
