// Package controlplane runs the control-plane components of one local
// machine inside its `capstan node run` process: an etcd member, kube-apiserver,
// the kube-controller-manager controllers a workload cluster needs and
// kube-scheduler, with certificates from the cluster's CAs laid out as kubeadm
// lays them out. Several machines of one cluster run side by side, so the
// controllers and the scheduler take turns through Leases in kube-system and
// a machine can join the etcd cluster of the others (AddEtcdMember).
package controlplane
