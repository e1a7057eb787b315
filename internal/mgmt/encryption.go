package mgmt

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiserverv1 "k8s.io/apiserver/pkg/apis/apiserver/v1"
	"sigs.k8s.io/yaml"

	"capstan.dev/capstan/internal/atomicfile"
)

// encryptionKeyName names the plane's key in the stored values' prefix
// (k8s:enc:secretbox:v1:<name>:), so that a key added later can be told
// apart from it.
const encryptionKeyName = "capstan-1"

// encryptionConfig is the kube-apiserver EncryptionConfiguration of the
// plane, key included: it must be readable by the plane alone.
func (p pki) encryptionConfig() string { return p.path("encryption-config.yaml") }

// ensureEncryptionConfig makes, once, the configuration under which the
// API server encrypts Secrets before they reach etcd: secretbox
// (XSalsa20-Poly1305) with a random 32-byte key. An existing file is kept
// as it is, since losing its key would make every stored Secret
// unreadable. The identity provider comes second so that Secrets a plane
// stored before it had a key are still read; each is encrypted the next
// time it is written.
func (p pki) ensureEncryptionConfig() error {
	if _, err := os.Stat(p.encryptionConfig()); err == nil {
		return nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return fmt.Errorf("making the encryption key: %w", err)
	}
	cfg := apiserverv1.EncryptionConfiguration{
		TypeMeta: metav1.TypeMeta{APIVersion: "apiserver.config.k8s.io/v1", Kind: "EncryptionConfiguration"},
		Resources: []apiserverv1.ResourceConfiguration{{
			Resources: []string{"secrets"},
			Providers: []apiserverv1.ProviderConfiguration{
				{Secretbox: &apiserverv1.SecretboxConfiguration{Keys: []apiserverv1.Key{
					{Name: encryptionKeyName, Secret: base64.StdEncoding.EncodeToString(key)},
				}}},
				{Identity: &apiserverv1.IdentityConfiguration{}},
			},
		}},
	}
	body, err := yaml.Marshal(cfg)
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(p.encryptionConfig(), body, 0o600)
}
