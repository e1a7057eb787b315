// Package topology is the shared vocabulary of managed topologies (a
// Cluster's spec.topology built from a ClusterClass): what role each
// templated object plays and the values patches see. The decisions live in
// its subpackages, each a pure function over plain data:
//
//   - variables: checks a class's variable definitions and a Cluster's values
//     against them, defaults the values and computes the builtin variables;
//   - patches: applies a class's inline patches to the templates;
//   - desired: computes every object a topology wants from the class, the
//     Cluster and what exists.
//
// The controllers gather the inputs and apply the results.
package topology
