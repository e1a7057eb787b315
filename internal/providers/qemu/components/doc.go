// Package components builds, on the host, the programs a real Kubernetes
// node runs and the container images kubeadm expects to find, from their
// sources on the Go module proxy: upstream's kubeadm, kubelet, kubectl,
// kube-apiserver, kube-controller-manager, kube-scheduler and kube-proxy
// (one multi-call binary, as hyperkube was), etcd, CoreDNS, the pause
// program, containerd with its runc shim, and crictl (runc itself is
// Debian's package).
//
// Each build is a small Go module written into a temporary directory —
// requirements, and for the Kubernetes binary a main that dispatches on its
// name — resolved by the go command against the checksum database and built
// with the user's Go toolchain and build cache. Results are kept in a cache
// directory under a key of everything that decides their content (the
// recipe, the versions, the toolchain), so a second build of the same
// recipe is a lookup, and two processes building the same part share one
// build through a lock file.
//
// The versions of etcd, CoreDNS and pause come from the built kubeadm
// itself (kubeadm config images list), so the images carry the names and
// tags that kubeadm of that Kubernetes version pulls.
package components
