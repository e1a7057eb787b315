package mgmt

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"capstan.dev/capstan/config/crd"
)

// fieldManager is the name under which Capstan's own writes appear in
// managedFields.
const fieldManager = "capstan"

// InstallCRDs server-side applies every CRD this build carries and waits
// until the API server serves them all. Applying an unchanged CRD writes
// nothing, so doing this on every start costs no etcd writes.
func InstallCRDs(ctx context.Context, cfg *rest.Config) error {
	crds, err := crd.All()
	if err != nil {
		return fmt.Errorf("reading embedded CRDs: %w", err)
	}
	client, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	api := client.ApiextensionsV1().CustomResourceDefinitions()
	for _, c := range crds {
		c.APIVersion = apiextensionsv1.SchemeGroupVersion.String()
		c.Kind = "CustomResourceDefinition"
		body, err := json.Marshal(c)
		if err != nil {
			return err
		}
		force := true
		if _, err := api.Patch(ctx, c.Name, types.ApplyPatchType, body,
			metav1.PatchOptions{FieldManager: fieldManager, Force: &force}); err != nil {
			return fmt.Errorf("installing CRD %s: %w", c.Name, err)
		}
	}
	deadline := time.Now().Add(time.Minute)
	for _, c := range crds {
		for {
			got, err := api.Get(ctx, c.Name, metav1.GetOptions{})
			if err == nil && crdEstablished(got) {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("CRD %s was not Established after a minute: %s", c.Name, crdProblem(got, err))
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return nil
}

func crdEstablished(c *apiextensionsv1.CustomResourceDefinition) bool {
	for _, cond := range c.Status.Conditions {
		if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}

func crdProblem(c *apiextensionsv1.CustomResourceDefinition, err error) string {
	if err != nil {
		return err.Error()
	}
	for _, cond := range c.Status.Conditions {
		if cond.Status != apiextensionsv1.ConditionTrue {
			return fmt.Sprintf("%s=%s: %s", cond.Type, cond.Status, cond.Message)
		}
	}
	return "no conditions yet"
}
