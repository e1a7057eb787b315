package mgmt

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"golang.org/x/sync/errgroup"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apiextensionsv1client "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/typed/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"capstan.dev/capstan/config/crd"
)

// fieldManager is the name under which Capstan's own writes appear in
// managedFields.
const fieldManager = "capstan"

// crdDigestAnnotation records, on each CRD Capstan installs, a digest of
// the definition it applied, so that a start finds out without a write
// which CRDs are already as this build wants them.
const crdDigestAnnotation = "capstan.dev/crd-digest"

// crdApplyWorkers is how many CRDs are applied at once: the API server
// compiles each one's schema and validation rules, which takes it a
// tenth of a second or more per CRD.
const crdApplyWorkers = 4

// InstallCRDs server-side applies every CRD this build carries that is not
// in place yet, and waits until the API server serves them all. A CRD is in
// place when it is Established, carries this build's digest of its
// definition and no one but Capstan changed its spec; so a restart with
// nothing changed applies none, and a CRD someone else edited is put back.
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
	list, err := api.List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing CRDs: %w", err)
	}
	installed := make(map[string]*apiextensionsv1.CustomResourceDefinition, len(list.Items))
	for i := range list.Items {
		installed[list.Items[i].Name] = &list.Items[i]
	}
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(crdApplyWorkers)
	for _, c := range crds {
		body, digest, err := crdApplyBody(c)
		if err != nil {
			return err
		}
		if crdInPlace(installed[c.Name], digest) {
			continue
		}
		g.Go(func() error {
			force := true
			if _, err := api.Patch(ctx, c.Name, types.ApplyPatchType, body,
				metav1.PatchOptions{FieldManager: fieldManager, Force: &force}); err != nil {
				return fmt.Errorf("installing CRD %s: %w", c.Name, err)
			}
			return waitEstablished(ctx, api, c.Name, time.Now().Add(time.Minute))
		})
	}
	return g.Wait()
}

// crdApplyBody is the apply request for c, with the digest of c's
// definition in crdDigestAnnotation, and that digest.
func crdApplyBody(c *apiextensionsv1.CustomResourceDefinition) ([]byte, string, error) {
	c = c.DeepCopy()
	c.APIVersion = apiextensionsv1.SchemeGroupVersion.String()
	c.Kind = "CustomResourceDefinition"
	delete(c.Annotations, crdDigestAnnotation)
	plain, err := json.Marshal(c)
	if err != nil {
		return nil, "", err
	}
	sum := sha256.Sum256(plain)
	digest := hex.EncodeToString(sum[:16])
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	c.Annotations[crdDigestAnnotation] = digest
	body, err := json.Marshal(c)
	return body, digest, err
}

// crdInPlace tells whether the installed CRD cur is Established, was last
// applied from a definition of this digest, and has no spec fields another
// field manager wrote since.
func crdInPlace(cur *apiextensionsv1.CustomResourceDefinition, digest string) bool {
	if cur == nil || cur.Annotations[crdDigestAnnotation] != digest || !crdEstablished(cur) {
		return false
	}
	for _, m := range cur.ManagedFields {
		if m.Subresource == "" && m.Manager != fieldManager {
			return false
		}
	}
	return true
}

// waitEstablished polls CRD name until the API server reports it
// Established, or deadline passes.
func waitEstablished(ctx context.Context, api apiextensionsv1client.CustomResourceDefinitionInterface, name string, deadline time.Time) error {
	for {
		got, err := api.Get(ctx, name, metav1.GetOptions{})
		if err == nil && crdEstablished(got) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("CRD %s was not Established after a minute: %s", name, crdProblem(got, err))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
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
