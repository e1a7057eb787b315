package console

import (
	"testing"

	"k8s.io/client-go/rest"
)

// The routes must not conflict: a conflict panics when the handler is built,
// which in the plane process would take the API server down with it.
func TestHandlerBuilds(t *testing.T) {
	srv, err := New(Options{Config: &rest.Config{Host: "https://127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	_ = srv.Handler()
}
