// Package lb is a local cluster's control-plane load balancer: a TCP proxy
// on a loopback port that spreads connections round-robin over the API
// servers of the cluster's machines. Backends are the machines'
// apiserver-endpoint files, re-read every 250 ms (local files: cheap, and no
// API calls), and each is health-checked with GET /readyz every 500 ms. A
// backend that disappears or fails a check gets no new connections;
// connections already open to it carry on until either side closes them, so
// a control-plane machine can leave gracefully. `capstan node lb` runs it;
// docs/local-provider.md is the contract.
package lb
