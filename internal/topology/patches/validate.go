package patches

import (
	"fmt"
	"reflect"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/topology/variables"
)

// ValidateClass checks a ClusterClass's patches as upstream's admission
// does: everything Validate checks, and against the class itself that every
// selector picks at least one of the class's templates and that every
// valueFrom.variable names a variable the class defines or a builtin
// variable. An admission webhook refuses a class with these errors; each
// names the field and what to write instead.
func ValidateClass(class *clusterv1.ClusterClass) field.ErrorList {
	at := field.NewPath("spec", "patches")
	errs := Validate(class.Spec.Patches, at)
	defined := map[string]bool{}
	for _, v := range class.Spec.Variables {
		defined[v.Name] = true
	}
	for i, p := range class.Spec.Patches {
		for j, d := range p.Definitions {
			dat := at.Index(i).Child("definitions").Index(j)
			errs = append(errs, selectorMatchesClass(d.Selector, class, dat.Child("selector"))...)
			for k, jp := range d.JSONPatches {
				if jp.Op == OpRemove || jp.ValueFrom == nil || jp.ValueFrom.Variable == "" {
					continue
				}
				if err := variableDefined(jp.ValueFrom.Variable, defined); err != "" {
					errs = append(errs, field.Invalid(dat.Child("jsonPatches").Index(k).Child("valueFrom", "variable"), jp.ValueFrom.Variable, err))
				}
			}
		}
	}
	return errs
}

// Validate checks what can be checked in a class's patches without the rest
// of the class: names unique, exactly one of definitions and external, the
// Go templates parse, and every jsonPatch (op, path, value) and selector
// class name as checkJSONPatch and checkClassName say.
func Validate(patches []clusterv1.ClusterClassPatch, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, p := range patches {
		at := fldPath.Index(i)
		if seen[p.Name] {
			errs = append(errs, field.Duplicate(at.Child("name"), p.Name))
		}
		seen[p.Name] = true
		if p.EnabledIf != "" {
			if _, err := parseTemplate(p.EnabledIf); err != nil {
				errs = append(errs, field.Invalid(at.Child("enabledIf"), p.EnabledIf, err.Error()))
			}
		}
		if err := checkKind(p); err != nil {
			errs = append(errs, field.Invalid(at, p.Name, err.Error()))
		}
		for j, d := range p.Definitions {
			errs = append(errs, validateSelector(d.Selector, at.Child("definitions").Index(j).Child("selector"))...)
			for k, jp := range d.JSONPatches {
				if err := checkJSONPatch(jp); err != nil {
					errs = append(errs, field.Invalid(at.Child("definitions").Index(j).Child("jsonPatches").Index(k), jp.Path, err.Error()))
				}
			}
		}
	}
	return errs
}

func validateSelector(s clusterv1.PatchSelector, at *field.Path) field.ErrorList {
	var errs field.ErrorList
	m := s.MatchResources
	if !ptr.Deref(m.ControlPlane, false) && !ptr.Deref(m.InfrastructureCluster, false) &&
		(m.MachineDeploymentClass == nil || len(m.MachineDeploymentClass.Names) == 0) &&
		(m.MachinePoolClass == nil || len(m.MachinePoolClass.Names) == 0) {
		errs = append(errs, field.Required(at.Child("matchResources"),
			"the selector matches nothing: set controlPlane or infrastructureCluster to true, or name classes in machineDeploymentClass or machinePoolClass"))
	}
	if m.MachineDeploymentClass != nil {
		errs = append(errs, checkClassNames(m.MachineDeploymentClass.Names, at.Child("matchResources", "machineDeploymentClass", "names"))...)
	}
	if m.MachinePoolClass != nil {
		errs = append(errs, checkClassNames(m.MachinePoolClass.Names, at.Child("matchResources", "machinePoolClass", "names"))...)
	}
	return errs
}

func checkClassNames(names []string, at *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, name := range names {
		if err := checkClassName(name); err != nil {
			errs = append(errs, field.Invalid(at.Index(i), name, err.Error()))
		}
	}
	return errs
}

// selectorMatchesClass refuses a selector part that picks none of the
// class's templates: a patch that can never apply is a mistake in its
// apiVersion, kind or place.
func selectorMatchesClass(s clusterv1.PatchSelector, class *clusterv1.ClusterClass, at *field.Path) field.ErrorList {
	var errs field.ErrorList
	m := s.MatchResources
	same := func(ref clusterv1.ClusterClassTemplateReference) bool {
		return ref.APIVersion == s.APIVersion && ref.Kind == s.Kind
	}
	what := fmt.Sprintf("%s of %s", s.Kind, s.APIVersion)
	if ptr.Deref(m.InfrastructureCluster, false) && !same(class.Spec.Infrastructure.TemplateRef) {
		errs = append(errs, field.Invalid(at.Child("matchResources", "infrastructureCluster"), true,
			fmt.Sprintf("the class's infrastructure template is %s of %s, not %s: correct the selector's apiVersion and kind or unset infrastructureCluster",
				class.Spec.Infrastructure.TemplateRef.Kind, class.Spec.Infrastructure.TemplateRef.APIVersion, what)))
	}
	if ptr.Deref(m.ControlPlane, false) {
		machine := class.Spec.ControlPlane.MachineInfrastructure.TemplateRef
		if !same(class.Spec.ControlPlane.TemplateRef) && !(machine.IsDefined() && same(machine)) {
			errs = append(errs, field.Invalid(at.Child("matchResources", "controlPlane"), true,
				fmt.Sprintf("neither the class's control plane template nor its machine infrastructure template is %s: correct the selector's apiVersion and kind or unset controlPlane", what)))
		}
	}
	if m.MachineDeploymentClass != nil {
		var workers []workerClass
		for _, c := range class.Spec.Workers.MachineDeployments {
			workers = append(workers, workerClass{c.Class, c.Bootstrap.TemplateRef, c.Infrastructure.TemplateRef})
		}
		errs = append(errs, namesMatchClass(m.MachineDeploymentClass.Names, workers, same, "machineDeployment", what, at.Child("matchResources", "machineDeploymentClass", "names"))...)
	}
	if m.MachinePoolClass != nil {
		var workers []workerClass
		for _, c := range class.Spec.Workers.MachinePools {
			workers = append(workers, workerClass{c.Class, c.Bootstrap.TemplateRef, c.Infrastructure.TemplateRef})
		}
		errs = append(errs, namesMatchClass(m.MachinePoolClass.Names, workers, same, "machinePool", what, at.Child("matchResources", "machinePoolClass", "names"))...)
	}
	return errs
}

// workerClass is a MachineDeployment or MachinePool class: its name and templates.
type workerClass struct {
	name                      string
	bootstrap, infrastructure clusterv1.ClusterClassTemplateReference
}

// namesMatchClass refuses each selector class name that picks no worker
// class with a template of the selector's kind.
func namesMatchClass(names []string, workers []workerClass, same func(clusterv1.ClusterClassTemplateReference) bool, worker, what string, at *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, name := range names {
		found := false
		for _, w := range workers {
			if anyClassMatches([]string{name}, w.name) && (same(w.bootstrap) || same(w.infrastructure)) {
				found = true
				break
			}
		}
		if !found {
			errs = append(errs, field.Invalid(at.Index(i), name,
				fmt.Sprintf("no %s class of that name has a bootstrap or infrastructure template that is %s: correct the name or the selector's apiVersion and kind", worker, what)))
		}
	}
	return errs
}

// variableDefined says what is wrong with a valueFrom.variable reference
// for this class, "" when nothing is. A builtin reference must be one of the
// builtin variables (upstream refuses paths below them, such as one label);
// another must start with a variable the class defines. Fields below a
// class variable are checked when the patch applies, against the value.
func variableDefined(ref string, defined map[string]bool) string {
	name, err := VariableName(ref)
	if err != nil {
		return err.Error()
	}
	if name == variables.BuiltinsName {
		if !builtinPaths()[ref] {
			return "not a builtin variable: see the builtin variables of the ClusterClass documentation (builtin.cluster.name, builtin.controlPlane.version, builtin.machineDeployment.class, ...)"
		}
		return ""
	}
	if !defined[name] {
		return fmt.Sprintf("the class defines no variable %q: add it to spec.variables or correct the name", name)
	}
	return ""
}

// builtinPaths are the references to builtin variables that a patch may
// read: "builtin" and every field of variables.Builtins, found from its
// JSON names so that the two cannot drift apart.
var builtinPaths = sync.OnceValue(func() map[string]bool {
	paths := map[string]bool{}
	var walk func(prefix string, t reflect.Type)
	walk = func(prefix string, t reflect.Type) {
		paths[prefix] = true
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct {
			return
		}
		for i := range t.NumField() {
			name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
			if name == "" || name == "-" {
				continue
			}
			walk(prefix+"."+name, t.Field(i).Type)
		}
	}
	walk(variables.BuiltinsName, reflect.TypeFor[variables.Builtins]())
	return paths
})
