package v1beta2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

// LocalClusterFinalizer holds a LocalCluster until its load balancer is
// stopped and its directory removed.
const LocalClusterFinalizer = "localcluster.infrastructure.cluster.x-k8s.io"

// LocalClusterSpec is the desired state of a LocalCluster.
type LocalClusterSpec struct {
	// controlPlaneEndpoint is where the cluster's API is served: the load
	// balancer's address. Leave it empty and the provider picks 127.0.0.1
	// and a free port; once set it does not change.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!has(oldSelf.port) || self == oldSelf",message="spec.controlPlaneEndpoint is immutable once set: create a new LocalCluster to use another endpoint"
	ControlPlaneEndpoint clusterv1.APIEndpoint `json:"controlPlaneEndpoint,omitempty,omitzero"`

	// failureDomains are the failure domains Machines may be spread over;
	// on one host they are labels only, copied to status for the core.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=100
	FailureDomains []clusterv1.FailureDomain `json:"failureDomains,omitempty"`
}

// LocalClusterInitializationStatus records the one-way steps of providing a
// cluster's infrastructure.
// +kubebuilder:validation:MinProperties=1
type LocalClusterInitializationStatus struct {
	// provisioned is true once the load balancer first listened on the
	// control-plane endpoint.
	// +optional
	Provisioned *bool `json:"provisioned,omitempty"`
}

// LocalLoadBalancerStatus is what the provider knows of the cluster's load
// balancer process.
type LocalLoadBalancerStatus struct {
	// pid of the `capstan node lb` process, 0 when none runs.
	// +optional
	PID int32 `json:"pid,omitempty"`

	// running tells whether the process holds its lock.
	// +optional
	Running bool `json:"running,omitempty"`

	// dir is the load balancer's directory on the management host.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Dir string `json:"dir,omitempty"`
}

// LocalClusterStatus is the observed state of a LocalCluster.
// +kubebuilder:validation:MinProperties=1
type LocalClusterStatus struct {
	// conditions: Ready, LoadBalancerReady, Paused.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// initialization tells whether the infrastructure was provisioned.
	// +optional
	Initialization LocalClusterInitializationStatus `json:"initialization,omitempty,omitzero"`

	// failureDomains are spec.failureDomains, as the core reads them.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=100
	FailureDomains []clusterv1.FailureDomain `json:"failureDomains,omitempty"`

	// loadBalancer is the state of the load balancer process.
	// +optional
	LoadBalancer LocalLoadBalancerStatus `json:"loadBalancer,omitempty,omitzero"`
}

// LocalCluster is the infrastructure of a Cluster whose machines are
// processes on the management host: a control-plane load balancer on a
// loopback port.
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=localclusters,shortName=lc,scope=Namespaced,categories=cluster-api
// +kubebuilder:metadata:labels={"cluster.x-k8s.io/v1beta2=v1beta2","clusterctl.cluster.x-k8s.io=","cluster.x-k8s.io/provider=infrastructure-local"}
// +kubebuilder:printcolumn:name="Cluster",type="string",JSONPath=`.metadata.ownerReferences[?(@.kind=="Cluster")].name`,description="Cluster that owns the LocalCluster"
// +kubebuilder:printcolumn:name="Endpoint",type="string",JSONPath=".spec.controlPlaneEndpoint.port",description="Load balancer port on 127.0.0.1"
// +kubebuilder:printcolumn:name="Provisioned",type="boolean",JSONPath=".status.initialization.provisioned",description="Whether the load balancer has listened"
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=`.status.conditions[?(@.type=="Ready")].status`,description="Whether the load balancer runs"
// +kubebuilder:printcolumn:name="LB PID",type="integer",JSONPath=".status.loadBalancer.pid",description="Load balancer process",priority=10
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description="Time since the LocalCluster was created"
type LocalCluster struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the object's standard metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired state of the LocalCluster.
	// +optional
	Spec LocalClusterSpec `json:"spec,omitempty,omitzero"`

	// status is the observed state of the LocalCluster.
	// +optional
	Status LocalClusterStatus `json:"status,omitempty,omitzero"`
}

// GetConditions returns the LocalCluster's conditions.
func (c *LocalCluster) GetConditions() []metav1.Condition { return c.Status.Conditions }

// SetConditions replaces the LocalCluster's conditions.
func (c *LocalCluster) SetConditions(conditions []metav1.Condition) {
	c.Status.Conditions = conditions
}

// LocalClusterList is a list of LocalClusters.
// +kubebuilder:object:root=true
type LocalClusterList struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the list's standard metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	// items are the LocalClusters.
	Items []LocalCluster `json:"items"`
}

// LocalClusterTemplateSpec is the desired state of a LocalClusterTemplate.
type LocalClusterTemplateSpec struct {
	// template is copied into every LocalCluster made from this template.
	// +required
	Template LocalClusterTemplateResource `json:"template,omitempty,omitzero"`
}

// LocalClusterTemplateResource is the part of a LocalCluster a template fixes.
type LocalClusterTemplateResource struct {
	// metadata holds labels and annotations for the LocalClusters made from the template.
	// +optional
	ObjectMeta clusterv1.ObjectMeta `json:"metadata,omitempty,omitzero"`

	// spec is the spec of the LocalClusters made from the template.
	// +optional
	Spec LocalClusterSpec `json:"spec,omitempty,omitzero"`
}

// LocalClusterTemplate is a template for LocalClusters (ClusterClass).
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:resource:path=localclustertemplates,scope=Namespaced,categories=cluster-api
// +kubebuilder:metadata:labels={"cluster.x-k8s.io/v1beta2=v1beta2","clusterctl.cluster.x-k8s.io=","cluster.x-k8s.io/provider=infrastructure-local"}
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description="Time since the LocalClusterTemplate was created"
type LocalClusterTemplate struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the object's standard metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec holds the template.
	// +required
	Spec LocalClusterTemplateSpec `json:"spec,omitempty,omitzero"`
}

// LocalClusterTemplateList is a list of LocalClusterTemplates.
// +kubebuilder:object:root=true
type LocalClusterTemplateList struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the list's standard metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	// items are the LocalClusterTemplates.
	Items []LocalClusterTemplate `json:"items"`
}

func init() {
	SchemeBuilder.Register(&LocalCluster{}, &LocalClusterList{}, &LocalClusterTemplate{}, &LocalClusterTemplateList{})
}
