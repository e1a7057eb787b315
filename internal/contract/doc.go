// Package contract is the one place where Capstan reads and writes provider
// objects — infrastructure clusters and machines, bootstrap configs,
// control planes — that it only knows through the Cluster API contract.
//
// A ContractVersionedObjectReference names a kind and an API group but no
// version. Resolver finds the version from the provider CRD's contract
// label (`cluster.x-k8s.io/v1beta2: v1beta1_v1beta2` lists the versions
// that implement the v1beta2 contract; the newest wins). Views that read
// with a user's rights may give it API discovery to fall back on when that
// user may not read CRDs (Resolver.Discovery); controllers never do. The accessors read
// the contract's paths from the unstructured object: the v1beta2 paths
// first, then the v1beta1 fallbacks (`status.ready`, `status.initialized`)
// so that providers that have not moved to v1beta2 keep working.
//
// Tracker adds a watch on a provider kind the first time a controller meets
// it, so that status changes of provider objects trigger reconciles instead
// of polls.
package contract
