package v1beta2

// The ClusterResourceSet's condition and its reasons. Tools written for
// Cluster API read them, so their spelling is part of the API.
const (
	// ResourcesAppliedCondition: every resource of the ClusterResourceSet
	// exists, is well formed, and is applied to every Cluster it selects.
	ResourcesAppliedCondition = "ResourcesApplied"

	// ResourcesAppliedReason: everything is applied.
	ResourcesAppliedReason = "Applied"

	// ResourcesNotAppliedReason: a resource is missing or malformed, or
	// applying it to some Cluster failed or has to wait.
	ResourcesNotAppliedReason = "NotApplied"

	// ResourcesAppliedWrongSecretTypeReason: a Secret named in
	// spec.resources is not of type addons.cluster.x-k8s.io/resource-set.
	ResourcesAppliedWrongSecretTypeReason = "WrongSecretType"

	// ResourcesAppliedInternalErrorReason: something unexpected went wrong,
	// such as the Clusters not being listable.
	ResourcesAppliedInternalErrorReason = "InternalError"
)
