package v1beta2

// Condition types and reasons a KubeadmConfig reports in status.conditions.
const (
	// ReadyCondition is True when the KubeadmConfig is not being deleted and
	// both DataSecretAvailable and CertificatesAvailable are True.
	ReadyCondition = "Ready"

	// DataSecretAvailableCondition is True when the bootstrap data Secret exists.
	DataSecretAvailableCondition = "DataSecretAvailable"

	// CertificatesAvailableCondition is True when the cluster certificates the
	// bootstrap data needs exist.
	CertificatesAvailableCondition = "CertificatesAvailable"

	// PausedCondition is True while reconciliation of the object is paused.
	PausedCondition = "Paused"
)

// Reasons used with the conditions above.
const (
	ReadyReason         = "Ready"
	NotReadyReason      = "NotReady"
	ReadyUnknownReason  = "ReadyUnknown"
	AvailableReason     = "Available"
	NotAvailableReason  = "NotAvailable"
	InternalErrorReason = "InternalError"
)
