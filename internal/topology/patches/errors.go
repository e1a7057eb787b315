package patches

import (
	"fmt"
	"strings"
)

// Error is a patch that could not be applied to a template. It names the
// place in the class (spec.patches[i].definitions[j].jsonPatches[k], the
// indexes being -1 where the error is not about one definition or one
// jsonPatch) and the template it was being applied to.
type Error struct {
	// Patch is the patch's name, PatchIndex its index in spec.patches.
	Patch      string
	PatchIndex int
	// Definition and JSONPatch are the indexes in definitions and in that
	// definition's jsonPatches; -1 when the error is not about one of them.
	Definition int
	JSONPatch  int
	// Template says which template of the topology was being patched;
	// empty for an error that does not depend on the template.
	Template string
	// Err is what went wrong.
	Err error
}

// Field is the class field at fault, e.g. spec.patches[1].definitions[0].jsonPatches[2].
func (e *Error) Field() string {
	var b strings.Builder
	fmt.Fprintf(&b, "spec.patches[%d]", e.PatchIndex)
	if e.Definition >= 0 {
		fmt.Fprintf(&b, ".definitions[%d]", e.Definition)
		if e.JSONPatch >= 0 {
			fmt.Fprintf(&b, ".jsonPatches[%d]", e.JSONPatch)
		}
	}
	return b.String()
}

func (e *Error) Error() string {
	on := ""
	if e.Template != "" {
		on = " to " + e.Template
	}
	return fmt.Sprintf("ClusterClass patch %q (%s) cannot be applied%s: %v", e.Patch, e.Field(), on, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// UnsupportedError is a class whose patches include external ones
// (spec.patches[].external): those need a Runtime SDK extension, which
// Capstan does not call. Nothing is applied when Apply returns it.
type UnsupportedError struct {
	// Patches are the names of the external patches, in the class's order.
	Patches []string
}

func (e *UnsupportedError) Error() string {
	quoted := make([]string, len(e.Patches))
	for i, name := range e.Patches {
		quoted[i] = fmt.Sprintf("%q", name)
	}
	subject := "patch " + quoted[0] + " is"
	if len(quoted) > 1 {
		subject = "patches " + strings.Join(quoted, ", ") + " are"
	}
	return "ClusterClass " + subject + " external (spec.patches[].external): Capstan does not run Runtime SDK extensions; " +
		"write the patch as inline definitions (spec.patches[].definitions) instead"
}
