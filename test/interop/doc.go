// Package interop runs upstream Cluster API's own parts against Capstan, as a
// user who already has them would: clusterctl (describe, get kubeconfig,
// alpha rollout, move) on Capstan's clusters, clusterctl's provider
// life-cycle (upgrade plan, init, generate cluster, delete) on the provider
// inventory Capstan records, with local file repositories in place of
// GitHub, and upstream's in-memory infrastructure provider under Capstan's
// core, bootstrap and control plane.
//
// It is a Go module of its own so that upstream's dependency versions never
// touch Capstan's. The upstream binaries are built from the Go module proxy
// at the versions this go.mod pins (tool directives) and kept in the user's
// cache directory between runs; Capstan is driven only through its binary
// (CAPSTAN_BIN) and the Kubernetes API, and its objects are read with
// upstream's Go types.
package interop
