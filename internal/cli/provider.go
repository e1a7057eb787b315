package cli

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"capstan.dev/capstan/internal/extprovider"
)

func init() { register(newProviderCommand) }

func newProviderCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "provider", Short: "Run third-party Cluster API providers with Capstan"}
	target := &mgmtTarget{keepsFiles: true}
	o := extprovider.Options{}
	install := &cobra.Command{
		Use:   "install NAME --components FILE|DIR --version vX.Y.Z",
		Short: "Install a provider's components for its manager to run as a process on this host",
		Long: `Install a third-party provider (NAME as clusterctl names it: infrastructure-aws,
bootstrap-talos, ...) into the management cluster, for its manager to run as a
process on this host against the management cluster's API server. This is how
a provider runs with the embedded plane of capstan up, which has no nodes for
the provider's Deployment.

From the provider's components YAML (what clusterctl init applies; a file or a
directory of *.yaml files, ${VARIABLES} filled from the environment), it applies
the CRDs, namespaces, RBAC and other plain objects labelled as clusterctl
labels them; points the webhook configurations and CRD conversion webhooks at
https://127.0.0.1:<--webhook-port> with the CA of a certificate it writes for
the manager's webhook server; skips the Deployment, Services and cert-manager
objects; and records the provider in clusterctl's inventory. It prints the
flags to start the manager with, and writes the kubeconfig it runs with: the
manager's own ServiceAccount (the one its Deployment names) with a token from
the TokenRequest API, so that it has the rights the provider's RBAC gives it,
not the plane's admin's. Running it again updates what it applied, issues a
new token (the manager rereads its file) and renews the certificate when it
nears expiry.

On a cluster with nodes (after capstan init), install providers as usual, with
their own Deployment: clusterctl init --infrastructure NAME, or kubectl apply.`,
		Example: `  capstan provider install infrastructure-dev --version v1.14.2 --components infrastructure-components.yaml
  POD_IP=127.0.0.1 ./manager --kubeconfig ~/.local/state/capstan/providers/infrastructure-dev/kubeconfig \
    --webhook-port 9443 --webhook-cert-dir ~/.local/state/capstan/providers/infrastructure-dev/certs`,
		Args: exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Name = args[0]
			o.Dir = filepath.Join(g.stateDir, "providers", o.Name)
			if _, err := extprovider.Check(o); err != nil {
				return err
			}
			c, err := target.client(g)
			if err != nil {
				return err
			}
			if o.APIServer, err = target.restConfig(g); err != nil {
				return err
			}
			res, err := extprovider.Install(cmd.Context(), c, o, time.Now())
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "Installed %s %s (%s, namespace %s): %d objects applied", o.Name, o.Version, res.Type, res.Namespace, len(res.Applied))
			if len(res.Skipped) > 0 {
				fmt.Fprintf(out, "; skipped, since the manager runs as a process with the certificate below: %s", strings.Join(res.Skipped, ", "))
			}
			fmt.Fprintf(out, ".\nWebhook certificate: %s (CA %s).\n", res.CertDir, res.CAFile)
			if res.Kubeconfig == "" {
				fmt.Fprintf(out, "The components name no ServiceAccount for the manager, so no kubeconfig was written for it: add the manager's ServiceAccount, RBAC and Deployment from the provider's release to --components and run this again.\n"+
					"Run the provider's manager on this host with:\n  --webhook-port %d --webhook-cert-dir %s\n", o.WebhookPort, res.CertDir)
				return nil
			}
			fmt.Fprintf(out, "Kubeconfig of the manager's ServiceAccount %s (its RBAC only; token until %s, run this command again before then): %s.\n",
				res.ServiceAccount, res.TokenExpires.UTC().Format(time.DateOnly), res.Kubeconfig)
			fmt.Fprintf(out, "Run the provider's manager on this host with:\n  --kubeconfig %s --webhook-port %d --webhook-cert-dir %s\n", res.Kubeconfig, o.WebhookPort, res.CertDir)
			return nil
		},
	}
	f := install.Flags()
	f.StringVar(&o.Components, "components", "", "the provider's components YAML: a file, or a directory of *.yaml files")
	f.StringVar(&o.Version, "version", "", "the provider's release (vX.Y.Z), recorded in clusterctl's inventory")
	f.IntVar(&o.WebhookPort, "webhook-port", 9443, "loopback port the manager's webhook server listens on")
	f.StringVar(&target.kubeconfig, "kubeconfig", "", "kubeconfig of the management cluster (default: $KUBECONFIG, else the running capstan plane's)")
	cmd.AddCommand(install)
	return cmd
}
