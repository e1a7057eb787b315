package v1beta2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

// QEMUClusterFinalizer holds a QEMUCluster until its load balancer is
// stopped and its directory removed.
const QEMUClusterFinalizer = "qemucluster.infrastructure.cluster.x-k8s.io"

// QEMUClusterSpec is the desired state of a QEMUCluster.
type QEMUClusterSpec struct {
	// controlPlaneEndpoint is where the cluster's API is served: a load
	// balancer on the management host's 127.0.0.1, which every VM reaches
	// at the same address through a forward of its own loopback. Leave it
	// empty and the provider picks 127.0.0.1 and a free port; once set it
	// does not change.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!has(oldSelf.port) || self == oldSelf",message="spec.controlPlaneEndpoint is immutable once set: create a new QEMUCluster to use another endpoint"
	// +kubebuilder:validation:XValidation:rule="!has(self.host) || self.host == '127.0.0.1' || self.host == 'localhost'",message="spec.controlPlaneEndpoint.host must be 127.0.0.1 (or localhost): the load balancer listens on the host's loopback only; leave the endpoint empty to let the provider choose"
	ControlPlaneEndpoint clusterv1.APIEndpoint `json:"controlPlaneEndpoint,omitempty,omitzero"`

	// failureDomains are the failure domains Machines may be spread over;
	// on one host they are labels only, copied to status for the core.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=100
	FailureDomains []clusterv1.FailureDomain `json:"failureDomains,omitempty"`
}

// QEMUClusterInitializationStatus records the one-way steps of providing a
// cluster's infrastructure.
// +kubebuilder:validation:MinProperties=1
type QEMUClusterInitializationStatus struct {
	// provisioned is true once the load balancer first listened on the
	// control-plane endpoint.
	// +optional
	Provisioned *bool `json:"provisioned,omitempty"`
}

// QEMULoadBalancerStatus is what the provider knows of the cluster's load
// balancer process.
type QEMULoadBalancerStatus struct {
	// pid of the `capstan node lb` process, 0 when none runs.
	// +optional
	PID int32 `json:"pid,omitempty"`

	// running tells whether the process holds its lock.
	// +optional
	Running bool `json:"running,omitempty"`

	// dir is the load balancer's directory on the management host; its
	// backends/ holds one file per control-plane machine.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Dir string `json:"dir,omitempty"`
}

// QEMUClusterStatus is the observed state of a QEMUCluster.
// +kubebuilder:validation:MinProperties=1
type QEMUClusterStatus struct {
	// conditions: Ready, LoadBalancerReady, Paused.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// initialization tells whether the infrastructure was provisioned.
	// +optional
	Initialization QEMUClusterInitializationStatus `json:"initialization,omitempty,omitzero"`

	// failureDomains are spec.failureDomains, as the core reads them.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=100
	FailureDomains []clusterv1.FailureDomain `json:"failureDomains,omitempty"`

	// loadBalancer is the state of the load balancer process.
	// +optional
	LoadBalancer QEMULoadBalancerStatus `json:"loadBalancer,omitempty,omitzero"`
}

// QEMUCluster is the infrastructure of a Cluster whose machines are QEMU
// virtual machines on the management host: a control-plane load balancer
// on a loopback port.
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=qemuclusters,shortName=qc,scope=Namespaced,categories=cluster-api
// +kubebuilder:metadata:labels={"cluster.x-k8s.io/v1beta2=v1beta2","clusterctl.cluster.x-k8s.io=","cluster.x-k8s.io/provider=infrastructure-qemu"}
// +kubebuilder:printcolumn:name="Cluster",type="string",JSONPath=`.metadata.ownerReferences[?(@.kind=="Cluster")].name`,description="Cluster that owns the QEMUCluster"
// +kubebuilder:printcolumn:name="Endpoint",type="string",JSONPath=".spec.controlPlaneEndpoint.port",description="Load balancer port on 127.0.0.1"
// +kubebuilder:printcolumn:name="Provisioned",type="boolean",JSONPath=".status.initialization.provisioned",description="Whether the load balancer has listened"
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=`.status.conditions[?(@.type=="Ready")].status`,description="Whether the load balancer runs"
// +kubebuilder:printcolumn:name="LB PID",type="integer",JSONPath=".status.loadBalancer.pid",description="Load balancer process",priority=10
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description="Time since the QEMUCluster was created"
type QEMUCluster struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the object's standard metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired state of the QEMUCluster.
	// +optional
	Spec QEMUClusterSpec `json:"spec,omitempty,omitzero"`

	// status is the observed state of the QEMUCluster.
	// +optional
	Status QEMUClusterStatus `json:"status,omitempty,omitzero"`
}

// GetConditions returns the QEMUCluster's conditions.
func (c *QEMUCluster) GetConditions() []metav1.Condition { return c.Status.Conditions }

// SetConditions replaces the QEMUCluster's conditions.
func (c *QEMUCluster) SetConditions(conditions []metav1.Condition) {
	c.Status.Conditions = conditions
}

// QEMUClusterList is a list of QEMUClusters.
// +kubebuilder:object:root=true
type QEMUClusterList struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the list's standard metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	// items are the QEMUClusters.
	Items []QEMUCluster `json:"items"`
}

func init() {
	SchemeBuilder.Register(&QEMUCluster{}, &QEMUClusterList{})
}
