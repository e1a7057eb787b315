package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

func init() { register(newGetCommand) }

func newGetCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "get", Short: "Get information about workload clusters"}
	target := &mgmtTarget{}
	kubeconfig := &cobra.Command{
		Use:   "kubeconfig NAME",
		Short: "Print a workload cluster's admin kubeconfig",
		Long: `Print a workload cluster's admin kubeconfig, as the control plane stored it in
the Secret <NAME>-kubeconfig (key "value") next to the Cluster.`,
		Example: `  capstan get kubeconfig demo > demo.kubeconfig
  kubectl --kubeconfig demo.kubeconfig get nodes`,
		Args: exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := target.client(g)
			if err != nil {
				return err
			}
			return runGetKubeconfig(cmd.Context(), c, cmd.OutOrStdout(), target.namespace, args[0])
		},
	}
	target.addFlags(kubeconfig)
	cmd.AddCommand(kubeconfig)
	return cmd
}

// kubeconfigSecretKey is the key of a cluster's kubeconfig Secret that holds
// the kubeconfig.
const kubeconfigSecretKey = "value"

func runGetKubeconfig(ctx context.Context, c client.Client, out io.Writer, namespace, name string) error {
	if ctx == nil {
		ctx = context.Background()
	}
	secretName := name + "-kubeconfig"
	secret := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: secretName}, secret); err != nil {
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("reading Secret %s/%s: %w", namespace, secretName, err)
		}
		cluster := &clusterv1.Cluster{}
		if cerr := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, cluster); apierrors.IsNotFound(cerr) {
			return fmt.Errorf("cluster %s not found in namespace %s: list the clusters with kubectl get clusters -A, and pass -n NAMESPACE", name, namespace)
		}
		return fmt.Errorf("cluster %s/%s has no kubeconfig yet: the Secret %s is written once its control plane is initialized (watch it with capstan describe cluster %s -n %s)", namespace, name, secretName, name, namespace)
	}
	value, ok := secret.Data[kubeconfigSecretKey]
	if !ok || len(value) == 0 {
		return fmt.Errorf("Secret %s/%s has no %q key: it is not a Cluster API kubeconfig Secret", namespace, secretName, kubeconfigSecretKey)
	}
	_, err := out.Write(value)
	return err
}
