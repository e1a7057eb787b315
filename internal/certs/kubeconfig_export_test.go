package certs

// EnsureKubeconfigAt lets tests run EnsureKubeconfig at a chosen time.
var EnsureKubeconfigAt = ensureKubeconfig
