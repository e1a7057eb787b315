package drain_test

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"capstan.dev/capstan/internal/drain"
)

// Example drains a node the way the Machine reconciler does: cordon, then one
// Drain pass per reconcile until the result is done, putting the message into
// the Machine's Deleting condition in between. Here the passes follow each
// other at once; the reconciler would requeue instead.
func Example() {
	ctx := context.Background()
	c := env.Client // an uncached client: it can list pods by node

	// A node with two pods of an application and the mirror of a static pod.
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "drain-example"}}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "example-node"}}
	for _, o := range []client.Object{ns, node} {
		if err := c.Create(ctx, o); err != nil {
			fmt.Println(err)
			return
		}
	}
	defer func() { _ = c.Delete(ctx, node); _ = c.Delete(ctx, ns) }()
	for _, name := range []string{"web-0", "web-1"} {
		if _, err := createPod(ctx, ns.Name, name, node.Name); err != nil {
			fmt.Println(err)
			return
		}
	}
	if _, err := createPod(ctx, ns.Name, "kube-proxy-example-node", node.Name, func(p *corev1.Pod) {
		p.Annotations = map[string]string{drain.MirrorPodAnnotation: "static"}
	}); err != nil {
		fmt.Println(err)
		return
	}

	if err := drain.Cordon(ctx, c, node.Name); err != nil {
		fmt.Println(err)
		return
	}
	for pass := 1; pass <= 5; pass++ {
		res, err := drain.Drain(ctx, c, node.Name, drain.Options{})
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(res.Message())
		if res.Done() {
			break
		}
	}
	// Output:
	// draining node example-node: 2 pods evicted
	// node example-node drained (1 pod skipped)
}
