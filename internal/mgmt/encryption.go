package mgmt

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	apiserverv1 "k8s.io/apiserver/pkg/apis/apiserver/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
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

// secretsKeyPrefix is where the API server keeps Secrets in etcd.
const secretsKeyPrefix = "/registry/secrets/"

// encryptPlainSecrets rewrites, through the API server, every Secret etcd
// still holds in plain text — stored by a plane from before it had a key —
// so that each is encrypted now rather than at its next change, which may
// never come. A Secret already encrypted costs no write: the values are
// read from etcd first, and only unencrypted ones are updated (an update
// that changes nothing still stores the object when the API server read it
// through the identity provider). It returns how many it rewrote.
func (d StateDir) encryptPlainSecrets(ctx context.Context, ports Ports, admin *rest.Config) (int, error) {
	etcd, err := d.etcdClient(ports)
	if err != nil {
		return 0, err
	}
	defer etcd.Close()
	stored, err := etcd.Get(ctx, secretsKeyPrefix, clientv3.WithPrefix())
	if err != nil {
		return 0, fmt.Errorf("reading the stored Secrets: %w", err)
	}
	var plain []types.NamespacedName
	for _, kv := range stored.Kvs {
		if bytes.HasPrefix(kv.Value, []byte("k8s:enc:")) {
			continue
		}
		namespace, name, ok := strings.Cut(strings.TrimPrefix(string(kv.Key), secretsKeyPrefix), "/")
		if !ok {
			continue
		}
		plain = append(plain, types.NamespacedName{Namespace: namespace, Name: name})
	}
	if len(plain) == 0 {
		return 0, nil
	}
	secrets, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return 0, err
	}
	rewritten := 0
	for _, key := range plain {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			s, err := secrets.CoreV1().Secrets(key.Namespace).Get(ctx, key.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			_, err = secrets.CoreV1().Secrets(key.Namespace).Update(ctx, s, metav1.UpdateOptions{})
			return err
		})
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return rewritten, fmt.Errorf("encrypting Secret %s: %w", key, err)
		default:
			rewritten++
		}
	}
	return rewritten, nil
}
