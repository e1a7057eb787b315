package mgmt

import (
	"fmt"
	"os"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"capstan.dev/capstan/internal/atomicfile"
)

// contextName is the kubeconfig context, cluster and user name of the plane.
const contextName = "capstan"

func (d StateDir) restConfig(ports Ports, who leaf) *rest.Config {
	p := d.pki()
	return &rest.Config{
		Host: fmt.Sprintf("https://127.0.0.1:%d", ports.APIServer),
		TLSClientConfig: rest.TLSClientConfig{
			CAFile:   p.caCert(),
			CertFile: p.certFile(who),
			KeyFile:  p.keyFile(who),
		},
		QPS:   50,
		Burst: 100,
	}
}

// writeKubeconfig writes a self-contained admin kubeconfig: credentials are
// embedded so the file keeps working when copied elsewhere.
func (d StateDir) writeKubeconfig(server string) error {
	p := d.pki()
	ca, err := os.ReadFile(p.caCert())
	if err != nil {
		return err
	}
	cert, err := os.ReadFile(p.certFile(adminClient))
	if err != nil {
		return err
	}
	key, err := os.ReadFile(p.keyFile(adminClient))
	if err != nil {
		return err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[contextName] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	cfg.AuthInfos[contextName] = &clientcmdapi.AuthInfo{ClientCertificateData: cert, ClientKeyData: key}
	cfg.Contexts[contextName] = &clientcmdapi.Context{Cluster: contextName, AuthInfo: contextName}
	cfg.CurrentContext = contextName
	body, err := clientcmd.Write(*cfg)
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(d.KubeconfigPath(), body, 0o600)
}
