package v1beta2

// Names the MachinePool contract adds. They live in a file of their own
// rather than in machinepool_types.go so that the types stay as they are.
const (
	// MachinePoolNameLabel is put on the infrastructure machines a pool's
	// provider creates for its instances, and on the Machines the core
	// creates for them; its value is the pool's name (hashed when it is not
	// a valid label value).
	MachinePoolNameLabel = "cluster.x-k8s.io/pool-name"

	// ReplicasManagedByAnnotation on a MachinePool says something outside
	// Cluster API (a cloud's autoscaler) decides the number of instances:
	// the pool's size then follows what the infrastructure reports, and a
	// size change is reported as the phase Scaling.
	ReplicasManagedByAnnotation = "cluster.x-k8s.io/replicas-managed-by"
)
