package inmemory

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/httpstream/wsstream"
	"k8s.io/kubelet/pkg/cri/streaming/portforward"
)

// podDialer connects to port of Pod namespace/name: what a port-forward
// reaches.
type podDialer func(namespace, name string, port int32) (net.Conn, error)

// Timeouts of a port-forward connection, the kubelet's defaults.
const (
	portForwardIdleTimeout     = 4 * time.Hour
	portForwardCreationTimeout = 30 * time.Second
)

// portForward serves pods/portforward as the API server and the kubelet
// together would: the connection is upgraded to SPDY (the portforward.k8s.io
// protocol, served by the kubelet's own implementation), and each stream
// is joined to what the simulated Pod has on its port.
func (a *apiServer) portForward(w http.ResponseWriter, r *http.Request, res resource, namespace, name string) {
	if wsstream.IsWebSocketRequest(r) {
		// A refused upgrade makes client-go's port-forward fall back to
		// SPDY, which is all this server speaks.
		writeStatus(w, apierrors.NewBadRequest("port-forward over websockets is not served by the simulated API server; use SPDY"))
		return
	}
	if _, ok := a.store.get(res.storeKey(), namespace, name); !ok {
		writeStatus(w, apierrors.NewNotFound(res.gr(), name))
		return
	}
	if a.dialPod == nil {
		writeStatus(w, apierrors.NewBadRequest("this simulated API server forwards no ports"))
		return
	}
	portforward.ServePortForward(w, r, podForwarder{dial: a.dialPod, namespace: namespace, name: name},
		namespace+"/"+name, "", &portforward.V4Options{},
		portForwardIdleTimeout, portForwardCreationTimeout, portforward.SupportedProtocols)
}

type podForwarder struct {
	dial            podDialer
	namespace, name string
}

func (f podForwarder) PortForward(_ context.Context, _ string, _ types.UID, port int32, stream io.ReadWriteCloser) error {
	conn, err := f.dial(f.namespace, f.name, port)
	if err != nil {
		return err
	}
	defer conn.Close()
	done := make(chan struct{}, 2)
	go func() {
		_, _ = io.Copy(conn, stream)
		done <- struct{}{}
	}()
	go func() {
		_, _ = io.Copy(stream, conn)
		done <- struct{}{}
	}()
	// Either side ending ends the forwarded connection: the simulated etcd
	// neither half-closes nor expects its clients to.
	<-done
	return nil
}

// dialPod reaches the simulated Pod's port: an etcd Pod's client port
// (2379) is its member's endpoint, a kube-apiserver Pod's (kubeadm's 6443)
// the cluster's simulated API server; nothing else listens.
func (c *simCluster) dialPod(namespace, name string, port int32) (net.Conn, error) {
	pod, ok := c.store.get("/pods", namespace, name)
	if !ok {
		return nil, fmt.Errorf("pod %s/%s does not exist", namespace, name)
	}
	labels, _ := metaOf(pod)["labels"].(map[string]any)
	switch {
	case namespace == kubeSystem && labels["component"] == "etcd" && port == 2379:
		return c.etcd.connect(fieldValue(pod, "spec.nodeName"))
	case namespace == kubeSystem && labels["component"] == "kube-apiserver" && port == 6443:
		d := net.Dialer{Timeout: 5 * time.Second}
		return d.Dial("tcp", c.listener.Addr().String())
	}
	return nil, fmt.Errorf("nothing listens on port %d of the simulated pod %s/%s", port, namespace, name)
}
