// Package schema compares Capstan's CustomResourceDefinitions with upstream
// Cluster API's, kind by kind, so that a field upstream has and Capstan lacks
// (or the reverse) fails a test instead of surfacing in a user's manifest.
// Upstream's CRDs are read from the Go module cache at the version this
// module's go.mod pins; Capstan's from config/crd/bases in this repository.
package schema
