package manager

import "capstan.dev/capstan/internal/testenv"

// Plane gives the package's external tests (which may import test/fixture,
// an importer of this package) the plane TestMain started.
func Plane() *testenv.Env { return env }
