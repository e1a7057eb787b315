// Package scheme builds the runtime.Scheme that knows every kind Capstan
// reads and writes: Kubernetes' built-in kinds, CRDs, and Capstan's own API
// groups.
package scheme

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	addonsv1 "capstan.dev/capstan/api/addons/v1beta2"
	bootstrapv1 "capstan.dev/capstan/api/bootstrap/kubeadm/v1beta2"
	clusterctlv1 "capstan.dev/capstan/api/clusterctl/v1alpha3"
	controlplanev1 "capstan.dev/capstan/api/controlplane/kubeadm/v1beta2"
	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	inmemoryv1 "capstan.dev/capstan/api/infrastructure/inmemory/v1beta2"
	localv1 "capstan.dev/capstan/api/infrastructure/local/v1beta2"
	qemuv1 "capstan.dev/capstan/api/infrastructure/qemu/v1beta2"
)

// New returns a scheme with every kind Capstan uses registered.
func New() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme,
		apiextensionsv1.AddToScheme,
		clusterv1.AddToScheme,
		addonsv1.AddToScheme,
		bootstrapv1.AddToScheme,
		controlplanev1.AddToScheme,
		localv1.AddToScheme,
		inmemoryv1.AddToScheme,
		qemuv1.AddToScheme,
		clusterctlv1.AddToScheme,
	} {
		utilruntime.Must(add(s))
	}
	return s
}
