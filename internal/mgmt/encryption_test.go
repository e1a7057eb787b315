package mgmt

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strconv"
	"testing"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"capstan.dev/capstan/internal/certs"
	"capstan.dev/capstan/internal/etcdclient"
)

// The key is made once, readable by its owner only, and never replaced: a
// new key would leave every stored Secret unreadable.
func TestEncryptionConfigIsMadeOnceAndPrivate(t *testing.T) {
	p := pki{dir: t.TempDir()}
	if err := p.ensure(time.Now()); err != nil {
		t.Fatal(err)
	}
	first, err := os.ReadFile(p.encryptionConfig())
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(p.encryptionConfig()); fi.Mode().Perm() != 0o600 {
		t.Errorf("%s has mode %v, want 0600", p.encryptionConfig(), fi.Mode().Perm())
	}
	if err := p.ensure(time.Now()); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(p.encryptionConfig()); !bytes.Equal(first, again) {
		t.Error("the encryption configuration was replaced on a second start")
	}
}

// A Secret written through the plane's API server is stored encrypted in
// its etcd, and a Secret stored in plain text (by a plane from before
// encryption) is still read, and encrypted by the next start of the plane.
func TestSecretsAreEncryptedAtRest(t *testing.T) {
	env := startPlane(t)
	started := time.Now()
	defer func() { t.Logf("the checks took %s after the plane started", time.Since(started)) }()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := env.Namespace(t)
	const plaintext = "hunter2-in-plain-text"
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "fresh", Namespace: ns}, StringData: map[string]string{"password": plaintext}}
	if err := env.Client.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}

	dir := StateDir(env.StateDir)
	var ports Ports
	if err := readJSON(dir.portsPath(), &ports); err != nil {
		t.Fatal(err)
	}
	ca, err := certs.Load(dir.pki().etcdCACert(), dir.pki().etcdCAKey())
	if err != nil {
		t.Fatal(err)
	}
	etcd, err := etcdclient.New(ctx, ca, keyAlgorithm, []string{"https://127.0.0.1:" + strconv.Itoa(ports.EtcdClient)}, "encryption-test", 10*time.Second, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer etcd.Close()
	res, err := etcd.Get(ctx, "/registry/secrets/"+ns+"/fresh")
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Kvs) != 1 {
		t.Fatalf("etcd holds %d values for the Secret, want 1", len(res.Kvs))
	}
	raw := res.Kvs[0].Value
	if want := []byte("k8s:enc:secretbox:v1:" + encryptionKeyName + ":"); !bytes.HasPrefix(raw, want) {
		t.Errorf("the Secret is stored as %.40q…, want the prefix %q", raw, want)
	}
	if bytes.Contains(raw, []byte(plaintext)) {
		t.Error("etcd holds the Secret's value in plain text")
	}

	// A plane from before encryption stored Secrets as they are.
	legacy := corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: "legacy", Namespace: ns, UID: types.UID("0b7e5c52-1d1f-4a43-9b1e-5d0c8f1a2b3c"), CreationTimestamp: metav1.Now()},
		Data:       map[string][]byte{"password": []byte(plaintext)},
	}
	body, err := json.Marshal(legacy)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := etcd.Put(ctx, "/registry/secrets/"+ns+"/legacy", string(body)); err != nil {
		t.Fatal(err)
	}
	got := &corev1.Secret{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "legacy"}, got); err != nil {
		t.Fatalf("a Secret stored before encryption cannot be read: %v", err)
	}
	if string(got.Data["password"]) != plaintext {
		t.Errorf("the Secret stored before encryption reads %q, want %q", got.Data["password"], plaintext)
	}

	// A starting plane encrypts what it finds in plain text, once.
	rewritten, err := dir.encryptPlainSecrets(ctx, ports, env.Config)
	if err != nil {
		t.Fatal(err)
	}
	if rewritten != 1 {
		t.Errorf("encryptPlainSecrets rewrote %d Secrets, want 1 (the legacy one)", rewritten)
	}
	res, err = etcd.Get(ctx, "/registry/secrets/"+ns+"/legacy")
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Kvs) != 1 || bytes.Contains(res.Kvs[0].Value, []byte(plaintext)) || !bytes.HasPrefix(res.Kvs[0].Value, []byte("k8s:enc:")) {
		t.Errorf("after encryptPlainSecrets etcd holds the legacy Secret as %.40q…, want it encrypted", res.Kvs[0].Value)
	}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "legacy"}, got); err != nil || string(got.Data["password"]) != plaintext {
		t.Errorf("the re-encrypted Secret reads %q (%v), want %q", got.Data["password"], err, plaintext)
	}
	if again, err := dir.encryptPlainSecrets(ctx, ports, env.Config); err != nil || again != 0 {
		t.Errorf("a second pass rewrote %d Secrets (%v), want 0: nothing is left in plain text", again, err)
	}
}
