package workload

import (
	"errors"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ErrClusterNotConnected is matched (with errors.Is) by every error that means
// "there is no usable connection to this workload cluster right now". A
// reconciler that gets it should record the message in a condition and try
// again later; it is not a bug in the reconciler.
var ErrClusterNotConnected = errors.New("workload cluster not connected")

// Reason says why a workload cluster is not connected.
type Reason string

const (
	// ReasonKubeconfigMissing: the <cluster>-kubeconfig Secret does not exist
	// (yet). The control plane provider writes it once the API server is up.
	ReasonKubeconfigMissing Reason = "KubeconfigMissing"
	// ReasonKubeconfigInvalid: the Secret exists but its "value" key is
	// missing or is not a usable kubeconfig.
	ReasonKubeconfigInvalid Reason = "KubeconfigInvalid"
	// ReasonUnreachable: the API server named in the kubeconfig did not answer
	// a health probe (connection refused, timeout, TLS or authentication
	// failure, not ready).
	ReasonUnreachable Reason = "Unreachable"
	// ReasonDisconnected: the connection a client belonged to has been closed
	// (failed health probes, a changed kubeconfig, Disconnect); ask for a new
	// client.
	ReasonDisconnected Reason = "Disconnected"
	// ReasonStopped: the ClusterCache has been stopped (manager shutting down).
	ReasonStopped Reason = "Stopped"
)

// NotConnectedError is the error behind ErrClusterNotConnected. Its Message
// says what is wrong and what to do, and is safe to show in a condition: it
// never contains credentials.
type NotConnectedError struct {
	// Cluster is the Cluster object's namespace and name.
	Cluster client.ObjectKey
	// Reason classifies the failure.
	Reason Reason
	// Message explains the failure and the fix.
	Message string
	// Err is the underlying error, if any.
	Err error
}

func (e *NotConnectedError) Error() string {
	return fmt.Sprintf("workload cluster %s is not connected: %s", e.Cluster, e.Message)
}

// Is makes errors.Is(err, ErrClusterNotConnected) true.
func (e *NotConnectedError) Is(target error) bool { return target == ErrClusterNotConnected }

// Unwrap returns the underlying error.
func (e *NotConnectedError) Unwrap() error { return e.Err }

// ReasonOf returns the Reason of a NotConnectedError in err's chain, or "" if
// there is none.
func ReasonOf(err error) Reason {
	var nc *NotConnectedError
	if errors.As(err, &nc) {
		return nc.Reason
	}
	return ""
}

func notConnected(cluster client.ObjectKey, reason Reason, err error, format string, args ...any) *NotConnectedError {
	return &NotConnectedError{Cluster: cluster, Reason: reason, Message: fmt.Sprintf(format, args...), Err: err}
}

func stoppedError(cluster client.ObjectKey) *NotConnectedError {
	return notConnected(cluster, ReasonStopped, nil,
		"the workload cluster cache has been stopped (the manager is shutting down)")
}

func droppedError(cluster client.ObjectKey) *NotConnectedError {
	return notConnected(cluster, ReasonDisconnected, nil,
		"this client's connection was closed (failed health probes, a changed kubeconfig Secret, or the Cluster being deleted); get a new client with GetClient")
}
