// Package embedded runs Kubernetes control-plane components inside the
// calling process: an etcd member (go.etcd.io/etcd/server/v3/embed),
// kube-apiserver, a chosen set of kube-controller-manager controllers and
// kube-scheduler, each configured through the component's own flags so that
// every default the component documents holds.
//
// Both the management plane (internal/mgmt) and a local control-plane
// machine (internal/node/controlplane) start their components through this
// package, so there is one piece of code for each component.
//
// Kubernetes keeps feature gates, metrics registries and logging
// configuration per process: a process runs at most one API server,
// one controller manager and one scheduler. etcd has no such limit.
package embedded
