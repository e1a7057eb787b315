package cli

import (
	"testing"

	"capstan.dev/capstan/internal/testenv"
)

// env is the real management plane the package's integration tests share
// (no controllers run: tests write the statuses they need). This is the
// package's one TestMain; tests of any command use env and isolate
// themselves with env.Namespace(t).
var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }
