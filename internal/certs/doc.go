// Package certs holds the certificate primitives Capstan's parts share: the
// management plane's own PKI, the cluster certificate authorities of
// workload clusters, the leaf certificates a local machine mints from them,
// and the kubeconfigs that carry client certificates.
//
// Keys are RSA-2048 unless a caller names another KeyAlgorithm: that is
// kubeadm's and Cluster API's default, and what tools written for Cluster
// API expect to find in a cluster's CA Secrets. A cluster's configuration
// (encryptionAlgorithm) may choose a larger RSA key or ECDSA P-256/P-384;
// keys are read in any of PKCS #1, SEC 1 and PKCS #8, so existing keys of
// another algorithm keep working and are never replaced. Files are written
// atomically, key before certificate, so a crash never leaves a certificate
// whose key is missing.
package certs
