// Package oci writes container images as OCI image-layout archives: the tar
// files `ctr images import` (containerd) loads without a registry.
//
// Capstan's real nodes cannot pull: no registry is reachable from where
// they run. Every image a node needs is therefore built on the host from
// files the host has (binaries built from the Go module proxy, libraries of
// the guest's Debian root file system) and preloaded into the node's
// containerd under the name its Pods ask for. Layers are uncompressed and
// their tar headers carry no times, owners or host details, so the same
// files always give the same digests: an image that did not change is not
// stored twice, and a cache of built archives can be keyed by content.
package oci
