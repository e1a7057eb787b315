// Package names renders the naming templates of Cluster API objects (a
// MachineSet's Machines, the objects a ClusterClass's topology generates)
// and makes generated names: at most 63 characters, the last five random, as
// the Kubernetes convention for generated names has them. Pure: the random
// characters come from the caller.
package names
