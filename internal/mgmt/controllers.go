package mgmt

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/util/keyutil"
	"k8s.io/controller-manager/pkg/informerfactory"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/controller/clusterroleaggregation"
	"k8s.io/kubernetes/pkg/controller/garbagecollector"
	namespacecontroller "k8s.io/kubernetes/pkg/controller/namespace"
	serviceaccountcontroller "k8s.io/kubernetes/pkg/controller/serviceaccount"
	"k8s.io/kubernetes/pkg/serviceaccount"
)

// The resync and discovery periods kube-controller-manager uses by default.
const (
	informerResync      = 12 * time.Hour
	namespaceResync     = 5 * time.Minute
	gcDiscoveryInterval = 30 * time.Second
)

// runControllers starts the kube-controller-manager controllers a management
// cluster needs and returns a function that waits for them to stop after ctx
// is cancelled:
//   - namespace: empties and removes deleted namespaces;
//   - garbage collector: deletes dependents whose owners are gone, which is
//     how owner-reference cascades (foreground and background) happen;
//   - service accounts and their legacy token secrets;
//   - cluster role aggregation, which providers rely on to grant the manager
//     access to their kinds.
func runControllers(ctx context.Context, cfg *rest.Config, p pki) (wait func(), err error) {
	cfg = rest.CopyConfig(cfg)
	// These controllers make bursts of deletes when a namespace goes; a
	// management plane on loopback can take them.
	cfg.QPS, cfg.Burst = 200, 400
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	meta, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	typed := informers.NewSharedInformerFactory(kube, informerResync)
	metaInformers := metadatainformer.NewSharedInformerFactory(meta, informerResync)
	anyInformers := informerfactory.NewInformerFactory(typed, metaInformers)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(kube.Discovery()))
	informersStarted := make(chan struct{})
	logger := klog.FromContext(ctx)

	namespaces := namespacecontroller.NewNamespaceController(ctx, kube, meta,
		kube.Discovery().ServerPreferredNamespacedResources,
		typed.Core().V1().Namespaces(), namespaceResync, corev1.FinalizerKubernetes)

	graph := garbagecollector.NewDependencyGraphBuilder(ctx, meta, mapper,
		garbagecollector.DefaultIgnoredResources(), anyInformers, informersStarted)
	gc, err := garbagecollector.NewComposedGarbageCollector(ctx, kube, meta, mapper, graph)
	if err != nil {
		return nil, fmt.Errorf("garbage collector: %w", err)
	}

	accounts, err := serviceaccountcontroller.NewServiceAccountsController(logger,
		typed.Core().V1().ServiceAccounts(), typed.Core().V1().Namespaces(), kube,
		serviceaccountcontroller.DefaultServiceAccountsControllerOptions())
	if err != nil {
		return nil, fmt.Errorf("service account controller: %w", err)
	}

	signingKey, err := keyutil.PrivateKeyFromFile(p.serviceAccountKey())
	if err != nil {
		return nil, fmt.Errorf("service account signing key: %w", err)
	}
	generator, err := serviceaccount.JWTTokenGenerator(serviceaccount.LegacyIssuer, signingKey)
	if err != nil {
		return nil, err
	}
	rootCA, err := os.ReadFile(p.caCert())
	if err != nil {
		return nil, err
	}
	tokens, err := serviceaccountcontroller.NewTokensController(logger,
		typed.Core().V1().ServiceAccounts(), typed.Core().V1().Secrets(), kube,
		serviceaccountcontroller.TokensControllerOptions{TokenGenerator: generator, RootCA: rootCA})
	if err != nil {
		return nil, fmt.Errorf("service account token controller: %w", err)
	}

	aggregation := clusterroleaggregation.NewClusterRoleAggregation(typed.Rbac().V1().ClusterRoles(), kube.RbacV1())

	var wg sync.WaitGroup
	for _, run := range []func(){
		func() { namespaces.Run(ctx, 10) },
		func() { gc.Run(ctx, 20, gcDiscoveryInterval) },
		func() { gc.Sync(ctx, kube.Discovery(), gcDiscoveryInterval) },
		func() { accounts.Run(ctx, 1) },
		func() { tokens.Run(ctx, 5) },
		func() { aggregation.Run(ctx, 1) },
	} {
		wg.Go(run)
	}
	typed.Start(ctx.Done())
	metaInformers.Start(ctx.Done())
	close(informersStarted)
	return func() {
		wg.Wait()
		typed.Shutdown()
		metaInformers.Shutdown()
	}, nil
}
