// Package certs holds the certificate primitives Capstan's parts share: the
// management plane's own PKI, the cluster certificate authorities of
// workload clusters, the leaf certificates a local machine mints from them,
// and the kubeconfigs that carry client certificates.
//
// Keys are ECDSA P-256: small, fast to generate (a machine mints a dozen at
// boot) and accepted by every Kubernetes component. Files are written
// atomically, key before certificate, so a crash never leaves a certificate
// whose key is missing.
package certs
