package clustertopology

import "capstan.dev/capstan/internal/ssa"

// ownedBeyond is the name this package's tests knew the dropped-field check
// by before it moved to package ssa (whose own tests cover it in full).
func ownedBeyond(owned map[string]any, want any, path []string) string {
	return ssa.Dropped(owned, want, path)
}
