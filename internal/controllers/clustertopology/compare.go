package clustertopology

import "capstan.dev/capstan/internal/ssa"

// A server-side apply that would change nothing still costs a request, and
// a dry run costs one too; API requests are what the management plane is
// short of. So before applying, the controller asks package ssa about the
// copy it already has in its cache: does the object hold every value the
// desired object sets (a user's edit of a managed field, or a changed
// template, fails this), and does the topology's own apply record own a
// field the desired object no longer sets (an apply would remove it)?
// When both answers are "nothing to do", the controller does not write.

// needsApply tells whether applying want (a JSON-shaped map) over current
// would change current, and names the first difference found, for logs.
// owned are the field sets of the topology's applies of current.
func needsApply(current, want map[string]any, owned []map[string]any) (bool, string) {
	if why := ssa.Change(want, current, owned); why != "" {
		return true, why
	}
	if len(owned) == 0 {
		// Made by someone else, or the apply record is gone: one apply makes
		// the ownership ours, so that fields later dropped are removed.
		return true, "the topology does not own the object's fields yet"
	}
	return false, ""
}
