package embedded

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/informers"
	certificatesinformers "k8s.io/client-go/informers/certificates/v1"
	"k8s.io/client-go/kubernetes"
	v1core "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/util/keyutil"
	genericcontrollermanager "k8s.io/controller-manager/app"
	"k8s.io/controller-manager/pkg/clientbuilder"
	"k8s.io/controller-manager/pkg/informerfactory"
	"k8s.io/klog/v2"
	kcmconfig "k8s.io/kubernetes/cmd/kube-controller-manager/app/config"
	kcmoptions "k8s.io/kubernetes/cmd/kube-controller-manager/app/options"
	"k8s.io/kubernetes/cmd/kube-controller-manager/names"
	"k8s.io/kubernetes/pkg/controller/bootstrap"
	"k8s.io/kubernetes/pkg/controller/certificates/approver"
	"k8s.io/kubernetes/pkg/controller/certificates/cleaner"
	"k8s.io/kubernetes/pkg/controller/certificates/rootcacertpublisher"
	"k8s.io/kubernetes/pkg/controller/certificates/signer"
	"k8s.io/kubernetes/pkg/controller/clusterroleaggregation"
	"k8s.io/kubernetes/pkg/controller/deployment"
	"k8s.io/kubernetes/pkg/controller/garbagecollector"
	namespacecontroller "k8s.io/kubernetes/pkg/controller/namespace"
	"k8s.io/kubernetes/pkg/controller/nodelifecycle"
	"k8s.io/kubernetes/pkg/controller/replicaset"
	serviceaccountcontroller "k8s.io/kubernetes/pkg/controller/serviceaccount"
	"k8s.io/kubernetes/pkg/controller/tainteviction"
	"k8s.io/kubernetes/pkg/serviceaccount"
)

// ControllerManagerConfig configures kube-controller-manager controllers.
type ControllerManagerConfig struct {
	// Client is the identity the controllers act with; with
	// --use-service-account-credentials it only obtains each controller's
	// service account token.
	Client *rest.Config
	// Args are kube-controller-manager flags, e.g.
	// --controllers=namespace,garbagecollector --leader-elect=false.
	// --kubeconfig and --master are ignored (Client is used), and no port is
	// served. Only the controllers in Controllers() can be enabled.
	Args []string
	Log  logr.Logger
}

// ControllerManager is a running set of kube-controller-manager controllers.
type ControllerManager struct {
	*component
}

// controller is one controller this package can run: built per term from
// the shared informers, then run until the term ends.
type controller struct {
	aliases           []string
	disabledByDefault bool
	// client names the controller's identity (its service account with
	// --use-service-account-credentials), as kube-controller-manager does,
	// so the bootstrap RBAC roles system:controller:<client> apply.
	client string
	build  func(ctx context.Context, b *builder) (func(context.Context), error)
}

// Controllers lists the kube-controller-manager controllers this package
// runs, by canonical name. kube-controller-manager itself cannot be linked
// in: it brings the kubelet's and every volume plugin's dependencies. For the
// same reason the pod garbage collector (which imports the kubelet's
// eviction code) is not among them.
func Controllers() []string {
	return sets.List(sets.KeySet(controllers))
}

var controllers = map[string]controller{
	names.NamespaceController:        {aliases: []string{"namespace"}, client: "namespace-controller", build: buildNamespace},
	names.GarbageCollectorController: {aliases: []string{"garbagecollector"}, client: "generic-garbage-collector", build: buildGarbageCollector},
	names.ServiceAccountController: {aliases: []string{"serviceaccount"}, client: "service-account-controller", build: func(ctx context.Context, b *builder) (func(context.Context), error) {
		c, err := serviceaccountcontroller.NewServiceAccountsController(klog.FromContext(ctx),
			b.informers.Core().V1().ServiceAccounts(), b.informers.Core().V1().Namespaces(), b.client,
			serviceaccountcontroller.DefaultServiceAccountsControllerOptions())
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context) { c.Run(ctx, 1) }, nil
	}},
	// The token controller signs with the root identity, like
	// kube-controller-manager's: it is what other controllers' tokens come
	// from in the legacy scheme.
	names.ServiceAccountTokenController: {aliases: []string{"serviceaccount-token"}, build: buildTokens},
	names.ClusterRoleAggregationController: {aliases: []string{"clusterrole-aggregation"}, client: "clusterrole-aggregation-controller", build: func(ctx context.Context, b *builder) (func(context.Context), error) {
		c := clusterroleaggregation.NewClusterRoleAggregation(b.informers.Rbac().V1().ClusterRoles(), b.client.RbacV1())
		return func(ctx context.Context) { c.Run(ctx, 1) }, nil
	}},
	names.DeploymentController: {aliases: []string{"deployment"}, client: "deployment-controller", build: func(ctx context.Context, b *builder) (func(context.Context), error) {
		c, err := deployment.NewDeploymentController(ctx, b.informers.Apps().V1().Deployments(),
			b.informers.Apps().V1().ReplicaSets(), b.informers.Core().V1().Pods(), b.client)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context) {
			c.Run(ctx, int(b.config.ComponentConfig.DeploymentController.ConcurrentDeploymentSyncs))
		}, nil
	}},
	names.ReplicaSetController: {aliases: []string{"replicaset"}, client: "replicaset-controller", build: func(ctx context.Context, b *builder) (func(context.Context), error) {
		c := replicaset.NewReplicaSetController(ctx, b.informers.Apps().V1().ReplicaSets(),
			b.informers.Core().V1().Pods(), b.client, replicaset.BurstReplicas)
		return func(ctx context.Context) {
			c.Run(ctx, int(b.config.ComponentConfig.ReplicaSetController.ConcurrentRSSyncs))
		}, nil
	}},
	names.NodeLifecycleController: {aliases: []string{"nodelifecycle"}, client: "node-controller", build: func(ctx context.Context, b *builder) (func(context.Context), error) {
		nl := b.config.ComponentConfig.NodeLifecycleController
		c, err := nodelifecycle.NewNodeLifecycleController(ctx,
			b.informers.Coordination().V1().Leases(), b.informers.Core().V1().Pods(),
			b.informers.Core().V1().Nodes(), b.informers.Apps().V1().DaemonSets(), b.client,
			b.config.ComponentConfig.KubeCloudShared.NodeMonitorPeriod.Duration,
			nl.NodeStartupGracePeriod.Duration, nl.NodeMonitorGracePeriod.Duration,
			nl.NodeEvictionRate, nl.SecondaryNodeEvictionRate, nl.LargeClusterSizeThreshold, nl.UnhealthyZoneThreshold)
		if err != nil {
			return nil, err
		}
		return c.Run, nil
	}},
	names.TaintEvictionController: {client: "node-controller", build: func(ctx context.Context, b *builder) (func(context.Context), error) {
		c, err := tainteviction.New(ctx, b.client, b.informers.Core().V1().Pods(), b.informers.Core().V1().Nodes(), names.TaintEvictionController)
		if err != nil {
			return nil, err
		}
		return c.Run, nil
	}},
	names.CertificateSigningRequestSigningController: {aliases: []string{"csrsigning"}, client: "certificate-controller", build: buildSigners},
	names.CertificateSigningRequestApprovingController: {aliases: []string{"csrapproving"}, client: "certificate-controller", build: func(ctx context.Context, b *builder) (func(context.Context), error) {
		c := approver.NewCSRApprovingController(ctx, b.client, b.informers.Certificates().V1().CertificateSigningRequests())
		return func(ctx context.Context) { c.Run(ctx, 5) }, nil
	}},
	names.CertificateSigningRequestCleanerController: {aliases: []string{"csrcleaner"}, client: "certificate-controller", build: func(ctx context.Context, b *builder) (func(context.Context), error) {
		c := cleaner.NewCSRCleanerController(b.client.CertificatesV1().CertificateSigningRequests(), b.informers.Certificates().V1().CertificateSigningRequests())
		return func(ctx context.Context) { c.Run(ctx, 1) }, nil
	}},
	names.RootCACertificatePublisherController: {aliases: []string{"root-ca-cert-publisher"}, client: "root-ca-cert-publisher", build: func(ctx context.Context, b *builder) (func(context.Context), error) {
		if b.config.ComponentConfig.SAController.RootCAFile == "" {
			return nil, nil
		}
		rootCA, err := os.ReadFile(b.config.ComponentConfig.SAController.RootCAFile)
		if err != nil {
			return nil, fmt.Errorf("--root-ca-file: %w", err)
		}
		c, err := rootcacertpublisher.NewPublisher(b.informers.Core().V1().ConfigMaps(), b.informers.Core().V1().Namespaces(), b.client, rootCA)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context) { c.Run(ctx, 1) }, nil
	}},
	names.BootstrapSignerController: {aliases: []string{"bootstrapsigner"}, disabledByDefault: true, client: "bootstrap-signer", build: func(ctx context.Context, b *builder) (func(context.Context), error) {
		c, err := bootstrap.NewSigner(b.client, b.informers.Core().V1().Secrets(), b.informers.Core().V1().ConfigMaps(), bootstrap.DefaultSignerOptions())
		if err != nil {
			return nil, err
		}
		return c.Run, nil
	}},
	names.TokenCleanerController: {aliases: []string{"tokencleaner"}, disabledByDefault: true, client: "token-cleaner", build: func(ctx context.Context, b *builder) (func(context.Context), error) {
		c, err := bootstrap.NewTokenCleaner(b.client, b.informers.Core().V1().Secrets(), bootstrap.DefaultTokenCleanerOptions())
		if err != nil {
			return nil, err
		}
		return c.Run, nil
	}},
}

func controllerAliases() map[string]string {
	aliases := map[string]string{}
	for name, c := range controllers {
		for _, a := range c.aliases {
			aliases[a] = name
		}
	}
	return aliases
}

func controllersDisabledByDefault() []string {
	var off []string
	for name, c := range controllers {
		if c.disabledByDefault {
			off = append(off, name)
		}
	}
	sort.Strings(off)
	return off
}

// StartControllerManager validates the flags, then runs the enabled
// controllers in the background (while holding the kube-controller-manager
// lease when --leader-elect is on, the default) until ctx ends.
func StartControllerManager(ctx context.Context, cfg ControllerManagerConfig) (*ControllerManager, error) {
	opts, err := kcmoptions.NewKubeControllerManagerOptions()
	if err != nil {
		return nil, fmt.Errorf("kube-controller-manager options: %w", err)
	}
	all, disabled, aliases := Controllers(), controllersDisabledByDefault(), controllerAliases()
	fs := newFlagSet("kube-controller-manager")
	for _, set := range opts.Flags(all, disabled, aliases).FlagSets {
		fs.AddFlagSet(set)
	}
	// No serving port (the process reports health itself); the client comes
	// from cfg.Client, --master only satisfies the option checks.
	args := append([]string{"--secure-port=0", "--master=" + cfg.Client.Host}, cfg.Args...)
	if err := parseFlags("kube-controller-manager", fs, args); err != nil {
		return nil, err
	}
	// The API server of this process already applied the process-wide
	// feature gates from the shared component registry.
	c, err := opts.Config(ctx, all, disabled, aliases)
	if err != nil {
		return nil, fmt.Errorf("kube-controller-manager options: %w", err)
	}
	kubeconfig := rest.CopyConfig(cfg.Client)
	kubeconfig.ContentConfig.AcceptContentTypes = c.Kubeconfig.AcceptContentTypes
	kubeconfig.ContentConfig.ContentType = c.Kubeconfig.ContentType
	kubeconfig.QPS, kubeconfig.Burst = c.Kubeconfig.QPS, c.Kubeconfig.Burst
	c.Kubeconfig = kubeconfig
	if c.Client, err = kubernetes.NewForConfig(rest.AddUserAgent(rest.CopyConfig(kubeconfig), kcmoptions.KubeControllerManagerUserAgent)); err != nil {
		return nil, err
	}
	completed := c.Complete()

	m := &ControllerManager{component: newComponent("kube-controller-manager", cfg.Log)}
	run := func(ctx context.Context) error {
		return runControllers(klog.NewContext(ctx, cfg.Log), completed)
	}
	election := completed.ComponentConfig.Generic.LeaderElection
	if err := m.run(ctx, completed.Client, &election, run); err != nil {
		return nil, err
	}
	return m, nil
}

// builder is what a controller is built from during one term.
type builder struct {
	config    kcmconfig.CompletedConfig
	root      clientbuilder.ControllerClientBuilder
	clients   clientbuilder.ControllerClientBuilder
	client    kubernetes.Interface // the controller's own identity
	informers informers.SharedInformerFactory
	metadata  metadatainformer.SharedInformerFactory
	any       informerfactory.InformerFactory
	mapper    *restmapper.DeferredDiscoveryRESTMapper
	started   chan struct{}
}

// runControllers is one term of the controller manager: fresh informers and
// controllers, run until ctx ends.
func runControllers(ctx context.Context, c *kcmconfig.CompletedConfig) error {
	log := klog.FromContext(ctx)
	b := &builder{config: *c, started: make(chan struct{})}
	b.root = clientbuilder.SimpleControllerClientBuilder{ClientConfig: c.Kubeconfig}
	b.clients = b.root
	if c.ComponentConfig.KubeCloudShared.UseServiceAccountCredentials {
		b.clients = clientbuilder.NewDynamicClientBuilder(
			rest.AnonymousClientConfig(c.Kubeconfig), c.Client.CoreV1(), metav1.NamespaceSystem)
	}
	c.EventBroadcaster.StartRecordingToSink(&v1core.EventSinkImpl{Interface: c.Client.CoreV1().Events("")})

	shared, err := b.root.Client("shared-informers")
	if err != nil {
		return err
	}
	metaConfig, err := b.root.Config("metadata-informers")
	if err != nil {
		return err
	}
	metaClient, err := metadata.NewForConfig(metaConfig)
	if err != nil {
		return err
	}
	resync := c.ComponentConfig.Generic.MinResyncPeriod.Duration
	b.informers = informers.NewSharedInformerFactory(shared, resync)
	b.metadata = metadatainformer.NewSharedInformerFactory(metaClient, resync)
	b.any = informerfactory.NewInformerFactory(b.informers, b.metadata)
	if err := genericcontrollermanager.WaitForAPIServer(shared, 10*time.Second); err != nil {
		return err
	}
	b.mapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(shared.Discovery()))

	type running struct {
		name string
		run  func(context.Context)
	}
	var runs []running
	for _, name := range Controllers() {
		ctrl := controllers[name]
		off := sets.New[string]()
		if ctrl.disabledByDefault {
			off.Insert(name)
		}
		if !genericcontrollermanager.IsControllerEnabled(name, sets.NewString(sets.List(off)...), c.ComponentConfig.Generic.Controllers) {
			continue
		}
		if ctrl.client != "" {
			if b.client, err = b.clients.Client(ctrl.client); err != nil {
				return fmt.Errorf("%s client: %w", name, err)
			}
		} else if b.client, err = b.root.Client("tokens-controller"); err != nil {
			return err
		}
		run, err := ctrl.build(klog.NewContext(ctx, log.WithName(name)), b)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if run != nil {
			runs = append(runs, running{name, run})
		}
	}
	b.informers.Start(ctx.Done())
	b.metadata.Start(ctx.Done())
	close(b.started)

	var wg sync.WaitGroup
	for _, r := range runs {
		wg.Go(func() { r.run(klog.NewContext(ctx, log.WithName(r.name))) })
	}
	wg.Wait()
	b.informers.Shutdown()
	b.metadata.Shutdown()
	if ctx.Err() == nil {
		return errors.New("every controller stopped")
	}
	return nil
}

func buildNamespace(ctx context.Context, b *builder) (func(context.Context), error) {
	// Emptying a namespace is a burst of deletes; kube-controller-manager
	// lifts this controller's rate limit the same way.
	cfg, err := b.clients.Config("namespace-controller")
	if err != nil {
		return nil, err
	}
	cfg.QPS *= 20
	cfg.Burst *= 100
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	meta, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	nc := b.config.ComponentConfig.NamespaceController
	c := namespacecontroller.NewNamespaceController(ctx, client, meta,
		client.Discovery().ServerPreferredNamespacedResources,
		b.informers.Core().V1().Namespaces(), nc.NamespaceSyncPeriod.Duration, corev1.FinalizerKubernetes)
	return func(ctx context.Context) { c.Run(ctx, int(nc.ConcurrentNamespaceSyncs)) }, nil
}

func buildGarbageCollector(ctx context.Context, b *builder) (func(context.Context), error) {
	gcc := b.config.ComponentConfig.GarbageCollectorController
	if !gcc.EnableGarbageCollector {
		return nil, nil
	}
	cfg, err := b.clients.Config("generic-garbage-collector")
	if err != nil {
		return nil, err
	}
	meta, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	ignored := map[schema.GroupResource]struct{}{}
	for _, r := range gcc.GCIgnoredResources {
		ignored[schema.GroupResource{Group: r.Group, Resource: r.Resource}] = struct{}{}
	}
	graph := garbagecollector.NewDependencyGraphBuilder(ctx, meta, b.mapper, ignored, b.any, b.started)
	gc, err := garbagecollector.NewComposedGarbageCollector(ctx, b.client, meta, b.mapper, graph)
	if err != nil {
		return nil, err
	}
	// The period kube-controller-manager re-reads discovery with, to follow
	// new resources (CRDs).
	const discoveryPeriod = 30 * time.Second
	return func(ctx context.Context) {
		go gc.Sync(ctx, b.client.Discovery(), discoveryPeriod)
		gc.Run(ctx, int(gcc.ConcurrentGCSyncs), discoveryPeriod)
	}, nil
}

func buildTokens(ctx context.Context, b *builder) (func(context.Context), error) {
	sa := b.config.ComponentConfig.SAController
	if sa.ServiceAccountKeyFile == "" {
		return nil, nil
	}
	key, err := keyutil.PrivateKeyFromFile(sa.ServiceAccountKeyFile)
	if err != nil {
		return nil, fmt.Errorf("--service-account-private-key-file %s: %w", sa.ServiceAccountKeyFile, err)
	}
	var rootCA []byte
	if sa.RootCAFile != "" {
		if rootCA, err = os.ReadFile(sa.RootCAFile); err != nil {
			return nil, fmt.Errorf("--root-ca-file: %w", err)
		}
	}
	generator, err := serviceaccount.JWTTokenGenerator(serviceaccount.LegacyIssuer, key)
	if err != nil {
		return nil, err
	}
	c, err := serviceaccountcontroller.NewTokensController(klog.FromContext(ctx),
		b.informers.Core().V1().ServiceAccounts(), b.informers.Core().V1().Secrets(), b.client,
		serviceaccountcontroller.TokensControllerOptions{TokenGenerator: generator, RootCA: rootCA})
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) { c.Run(ctx, int(sa.ConcurrentSATokenSyncs)) }, nil
}

// buildSigners runs the signers kube-controller-manager runs with one
// --cluster-signing-cert-file/--cluster-signing-key-file pair.
func buildSigners(ctx context.Context, b *builder) (func(context.Context), error) {
	cs := b.config.ComponentConfig.CSRSigningController
	if cs.ClusterSigningCertFile == "" || cs.ClusterSigningKeyFile == "" {
		klog.FromContext(ctx).Info("Not signing certificates: no --cluster-signing-cert-file and --cluster-signing-key-file")
		return nil, nil
	}
	csrs := b.informers.Certificates().V1().CertificateSigningRequests()
	ttl := cs.ClusterSigningDuration.Duration
	type newSigner func(context.Context, kubernetes.Interface, certificatesinformers.CertificateSigningRequestInformer, string, string, time.Duration) (*signer.CSRSigningController, error)
	var runs []func(context.Context)
	for _, n := range []newSigner{
		signer.NewKubeletServingCSRSigningController,
		signer.NewKubeletClientCSRSigningController,
		signer.NewKubeAPIServerClientCSRSigningController,
		signer.NewLegacyUnknownCSRSigningController,
	} {
		s, err := n(ctx, b.client, csrs, cs.ClusterSigningCertFile, cs.ClusterSigningKeyFile, ttl)
		if err != nil {
			return nil, err
		}
		runs = append(runs, func(ctx context.Context) { s.Run(ctx, 5) })
	}
	return func(ctx context.Context) {
		var wg sync.WaitGroup
		for _, r := range runs {
			wg.Go(func() { r(ctx) })
		}
		wg.Wait()
	}, nil
}
