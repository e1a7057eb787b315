package qemu

// For the external tests: where a cluster's network sockets live.
var (
	SocketRoot = socketRoot
	NetworkDir = networkDir
)
