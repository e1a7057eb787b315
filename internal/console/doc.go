// Package console is Capstan's web console: an HTTP server on a loopback
// port that shows the Clusters of one management cluster, live, and offers a
// few confirmed actions, all done with the credentials of the kubeconfig it
// was started with (docs/console.md).
package console
