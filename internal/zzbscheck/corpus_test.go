package zzbscheck

import (
	"bytes"
	"context"
	json "k8s.io/apimachinery/pkg/util/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"
)

type kindSchema struct {
	structural *structuralschema.Structural
	validator  apiservervalidation.SchemaValidator
}

func loadSchemas(t *testing.T) map[string]kindSchema {
	out := map[string]kindSchema{}
	for _, f := range []string{
		"../../config/crd/bases/bootstrap.cluster.x-k8s.io_kubeadmconfigs.yaml",
		"../../config/crd/bases/bootstrap.cluster.x-k8s.io_kubeadmconfigtemplates.yaml",
	} {
		raw, _ := os.ReadFile(f)
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
		sch := in.Spec.Validation
		if in.Spec.Versions[0].Schema != nil {
			sch = in.Spec.Versions[0].Schema
		}
		st, err := structuralschema.NewStructural(sch.OpenAPIV3Schema)
		if err != nil {
			t.Fatal(err)
		}
		val, _, err := apiservervalidation.NewSchemaValidator(sch.OpenAPIV3Schema)
		if err != nil {
			t.Fatal(err)
		}
		out[in.Spec.Names.Kind] = kindSchema{st, val}
	}
	return out
}

func validate(ks kindSchema, obj, old map[string]any) field.ErrorList {
	var errs field.ErrorList
	if unknown := pruning.PruneWithOptions(runtime.DeepCopyJSON(obj), ks.structural, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true}); len(unknown) > 0 {
		errs = append(errs, field.Invalid(nil, unknown, "unknown fields"))
	}
	if old == nil {
		errs = append(errs, apiservervalidation.ValidateCustomResource(nil, obj, ks.validator)...)
	} else {
		errs = append(errs, apiservervalidation.ValidateCustomResourceUpdate(nil, obj, old, ks.validator)...)
	}
	errs = append(errs, listtype.ValidateListSetsAndMaps(nil, ks.structural, obj)...)
	v := cel.NewValidator(ks.structural, true, celconfig.PerCallLimit)
	var o any
	if old != nil {
		o = old
	}
	ce, _ := v.Validate(context.Background(), nil, ks.structural, obj, o, celconfig.RuntimeCELCostBudget)
	errs = append(errs, ce...)
	return errs
}

func docs(t *testing.T, path string) ([]map[string]any, []string) {
	raw, _ := os.ReadFile(path)
	var expects []string
	for _, l := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(l, "# expect: ") {
			expects = append(expects, strings.TrimPrefix(l, "# expect: "))
		}
	}
	var out []map[string]any
	for _, d := range bytes.Split(raw, []byte("\n---\n")) {
		m := map[string]any{}
		j, err := yaml.YAMLToJSON(d)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(j, &m); err != nil {
			t.Fatal(err)
		}
		if len(m) > 0 {
			out = append(out, m)
		}
	}
	return out, expects
}

func TestCorpus(t *testing.T) {
	schemas := loadSchemas(t)
	valid, _ := filepath.Glob("../../config/crd/testdata/valid/bootstrap-*.yaml")
	for _, f := range valid {
		ds, _ := docs(t, f)
		for _, d := range ds {
			ks := schemas[d["kind"].(string)]
			if errs := validate(ks, d, nil); len(errs) > 0 {
				t.Errorf("%s: refused: %v", f, errs.ToAggregate())
			}
		}
	}
	invalid, _ := filepath.Glob("../../config/crd/testdata/invalid/bootstrap-*.yaml")
	for _, f := range invalid {
		ds, expects := docs(t, f)
		seen := map[string]map[string]any{}
		for i, d := range ds {
			ks := schemas[d["kind"].(string)]
			md := d["metadata"].(map[string]any)
			key := d["kind"].(string) + "/" + md["name"].(string)
			old := seen[key]
			errs := validate(ks, d, old)
			if i < len(ds)-1 {
				if len(errs) > 0 {
					t.Errorf("%s: setup doc %d refused: %v", f, i, errs.ToAggregate())
				}
				seen[key] = d
				continue
			}
			if len(errs) == 0 {
				t.Errorf("%s: accepted", f)
				continue
			}
			msg := errs.ToAggregate().Error()
			for _, e := range expects {
				if !strings.Contains(msg, e) {
					t.Errorf("%s: %q not in %s", f, e, msg)
				}
			}
			t.Logf("%s: %s", filepath.Base(f), msg)
		}
	}
	_ = reflect.DeepEqual
}
