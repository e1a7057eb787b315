// Package webhook is Capstan's admission webhook server. It runs inside the
// manager (never behind cert-manager): it issues its own certificate
// authority and serving certificate, keeps them in a Secret that every
// replica shares, renews them before they expire without a restart, and
// writes the authority into Capstan's ValidatingWebhookConfiguration and
// MutatingWebhookConfiguration together with how the API server reaches it —
// a URL on loopback when the manager runs beside the API server (`capstan
// up`, or a manager Pod that is a process of the API server's host), or a
// Service when the manager is deployed into the cluster it manages.
//
// It checks what a CRD's schema and CEL rules cannot, because the answer
// lies in another object: a Cluster's topology against its ClusterClass
// (variables validated and defaulted, worker classes that exist, version
// changes upstream forbids, a new version only once the previous upgrade is
// done, a rebase only onto a compatible class) and a ClusterClass change
// against the Clusters that use the class (no worker class, variable or
// health check in use removed, no kinds changed, no class in use deleted).
package webhook
