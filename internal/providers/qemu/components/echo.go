package components

import _ "embed"

// EchoImage is the reference under which a node's containerd holds the
// echo program's image: the workload the end-to-end tests deploy. No
// registry is reachable from a node, so a Pod naming it must not pull it
// (imagePullPolicy IfNotPresent or Never; a tag other than latest keeps
// IfNotPresent the default).
const EchoImage = "capstan.local/echo:v1"

// EchoImageKey is EchoImage's key in Node.Images.
const EchoImageKey = "echo"

// echoMain is the echo program's source: an HTTP server on port 8080 (the
// -port flag, or PORT) that answers GET / with "host=<hostname>
// client=<remote IP>" and GET /healthz with "ok", and stops on SIGTERM.
//
//go:embed echomain.go.in
var echoMain string

// EchoPart builds the echo program: standard library only, so the build
// downloads nothing, and without cgo, so the binary is static and its image
// needs no other file.
func EchoPart() Part {
	return Part{
		// Version is only what progress reports: the cache key covers
		// Main, so a changed source is a new build whatever the tag.
		Name: "echo", Version: tagOf(EchoImage),
		Main:     echoMain,
		Packages: []string{"."},
		LDFlags:  "-s -w",
	}
}
