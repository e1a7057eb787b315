package zzbscheck

import (
	"context"
	"os"
	"testing"

	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

func TestCRDs(t *testing.T) {
	for _, f := range []string{
		"../../config/crd/bases/bootstrap.cluster.x-k8s.io_kubeadmconfigs.yaml",
		"../../config/crd/bases/bootstrap.cluster.x-k8s.io_kubeadmconfigtemplates.yaml",
	} {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(raw, crd); err != nil {
			t.Fatal(err)
		}
		s := runtime.NewScheme()
		_ = apiextensionsv1.AddToScheme(s)
		_ = apiextensionsinternal.AddToScheme(s)
		in := &apiextensionsinternal.CustomResourceDefinition{}
		if err := s.Convert(crd, in, nil); err != nil {
			t.Fatal(err)
		}
		errs := validation.ValidateCustomResourceDefinition(context.Background(), in)
		for _, e := range errs {
			t.Errorf("%s: %v", f, e)
		}
	}
}
