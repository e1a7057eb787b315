// Package kubeadm reads and writes the kubeadm configuration files that
// Cluster API's kubeadm bootstrap provider hands to a machine
// (/run/kubeadm/kubeadm.yaml and /run/kubeadm/kubeadm-join-config.yaml).
//
// Reading goes through kubeadm's own API scheme, so both published
// versions (kubeadm.k8s.io/v1beta3 and v1beta4) are defaulted and
// converted exactly as kubeadm itself would, and callers work with one set
// of internal types whatever version the file was written in.
package kubeadm
