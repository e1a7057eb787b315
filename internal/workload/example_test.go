package workload_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"capstan.dev/capstan/internal/workload"
)

// The cache connects to a workload cluster once its kubeconfig Secret exists.
// Here the management plane stands in for the workload cluster: any
// kubeconfig will do.
func Example() {
	ctx := context.Background()
	mc := mgmt.Client // in a manager: mgr.GetClient()

	cc, err := workload.New(mc, workload.Options{Scheme: mgmt.Scheme})
	if err != nil {
		panic(err)
	}
	// In a manager: mgr.Add(cc).
	runCtx, stop := context.WithCancel(ctx)
	stopped := make(chan struct{})
	go func() { _ = cc.Start(runCtx); close(stopped) }()
	defer func() { stop(); <-stopped }()

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "workload-example"}}
	if err := mc.Create(ctx, ns); err != nil {
		panic(err)
	}
	defer func() { _ = mc.Delete(ctx, ns) }()
	cluster := client.ObjectKey{Namespace: ns.Name, Name: "example"}

	_, err = cc.GetClient(ctx, cluster)
	fmt.Println("no kubeconfig yet:", errors.Is(err, workload.ErrClusterNotConnected), workload.ReasonOf(err))

	// The control plane provider publishes the kubeconfig.
	kubeconfig, err := os.ReadFile(filepath.Join(mgmt.StateDir, "kubeconfig"))
	if err != nil {
		panic(err)
	}
	if err := mc.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: cluster.Namespace, Name: workload.KubeconfigSecretName(cluster.Name)},
		Data:       map[string][]byte{workload.KubeconfigDataKey: kubeconfig},
	}); err != nil {
		panic(err)
	}

	remote, err := cc.GetClient(ctx, cluster)
	if err != nil {
		panic(err)
	}
	kubeSystem := &corev1.Namespace{}
	if err := remote.Get(ctx, client.ObjectKey{Name: "kube-system"}, kubeSystem); err != nil {
		panic(err)
	}
	fmt.Println("read from the workload cluster:", kubeSystem.Name)
	fmt.Println("connected:", cc.Health(cluster).Connected)

	// The Cluster is deleted.
	cc.Disconnect(cluster)
	fmt.Println("connected after Disconnect:", cc.Health(cluster).Connected)

	// Output:
	// no kubeconfig yet: true KubeconfigMissing
	// read from the workload cluster: kube-system
	// connected: true
	// connected after Disconnect: false
}
