package desired

import "capstan.dev/capstan/internal/ssa"

// contains and holds are the names this package's tests knew the two
// server-side apply checks by before they moved to package ssa (whose own
// tests cover them in full).

// contains tells whether have holds every value want sets.
func contains(have, want any) bool { return ssa.Missing(want, have, nil) == "" }

// holds tells whether value still sets every field of a managed-fields set.
func holds(value any, fields map[string]any) bool { return ssa.Dropped(fields, value, nil) == "" }
