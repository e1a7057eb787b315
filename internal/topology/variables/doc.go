// Package variables checks a ClusterClass's variable definitions and a
// Cluster's values against them, fills defaults, and assembles what a
// template's patches see (user values, overrides and the builtin variables).
// Pure functions: no client, no I/O.
//
// The checks reuse the API server's own libraries (apiextensions-apiserver's
// structural schemas, defaulting, OpenAPI validation and CEL), so that a
// variable behaves exactly as the same schema would in a CRD: a value is
// checked as a custom resource's field would be, its defaults filled as the
// API server fills them.
package variables
