package mgmt

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"capstan.dev/capstan/internal/backup"
	"capstan.dev/capstan/internal/certs"
	"capstan.dev/capstan/internal/embedded"
)

// withEtcd runs f with a client of d's etcd, started for the purpose.
func withEtcd(t *testing.T, d StateDir, f func(c *clientv3.Client)) {
	t.Helper()
	ctx := context.Background()
	ports, err := d.loadOrChoosePorts(0)
	if err != nil {
		t.Fatal(err)
	}
	e, err := startEtcd(ctx, d, ports, "error")
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	c, err := d.etcdClient(ports)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	f(c)
}

func value(t *testing.T, c *clientv3.Client, key string) string {
	t.Helper()
	resp, err := c.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return ""
	}
	return string(resp.Kvs[0].Value)
}

// A stopped plane's state directory is snapshotted (etcd started on its
// data while the directory is locked) with its credentials, and restored
// into a new directory and over itself (the old etcd data kept aside):
// the data and the CA come back. A damaged snapshot and a directory in use
// are refused without touching the directory.
func TestSnapshotAndRestoreStateDir(t *testing.T) {
	ctx := context.Background()
	d := StateDir(filepath.Join(t.TempDir(), "state"))
	if err := d.Prepare(); err != nil {
		t.Fatal(err)
	}
	if err := d.pki().ensure(time.Now()); err != nil {
		t.Fatal(err)
	}
	// The console's record holds its token, stale in a restored plane.
	if err := os.WriteFile(filepath.Join(string(d), "console.json"), []byte(`{"url":"http://127.0.0.1:1/?token=x"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Snapshot(ctx); err == nil || !strings.Contains(err.Error(), "no management plane") {
		t.Errorf("snapshot of an empty directory: %v", err)
	}
	withEtcd(t, d, func(c *clientv3.Client) {
		if _, err := c.Put(ctx, "/registry/kept", "before"); err != nil {
			t.Fatal(err)
		}
	})
	files, err := d.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := files["pki/ca.key"]; !ok || files["pki/ca.key"].Mode != 0o600 {
		t.Errorf("the snapshot lacks the CA key (or its mode): %v", files["pki/ca.key"].Mode)
	}
	for name := range files {
		if strings.HasPrefix(name, "etcd/") || name == "ports.json" || name == "capstan.lock" || name == "console.json" {
			t.Errorf("the snapshot holds %s", name)
		}
	}
	withEtcd(t, d, func(c *clientv3.Client) {
		if _, err := c.Put(ctx, "/registry/kept", "after"); err != nil {
			t.Fatal(err)
		}
	})

	// Refusals leave the target untouched.
	fresh := StateDir(filepath.Join(t.TempDir(), "fresh"))
	damaged := backup.Files{}
	for n, f := range files {
		damaged[n] = f
	}
	db := bytes.Clone(files[etcdSnapshotFile].Data)
	db[len(db)/2] ^= 1
	damaged[etcdSnapshotFile] = backup.File{Data: db, Mode: 0o600}
	if _, err := fresh.Restore(damaged); err == nil || !strings.Contains(err.Error(), "SHA-256") {
		t.Errorf("a damaged etcd snapshot: %v", err)
	}
	if _, err := os.Stat(string(fresh)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused restore created %s", fresh)
	}
	lock, err := d.TryLock()
	if err != nil {
		t.Fatal(err)
	}
	var inUse *RestoreError
	if _, err := d.Restore(files); !errors.As(err, &inUse) || !strings.Contains(err.Error(), "capstan down --state-dir") {
		t.Errorf("restore into a directory in use: %v", err)
	}
	lock.Release()

	// Into a new directory, then over the original.
	if aside, err := fresh.Restore(files); err != nil || aside != "" {
		t.Fatalf("restore into a new directory: %q, %v", aside, err)
	}
	withEtcd(t, fresh, func(c *clientv3.Client) {
		if v := value(t, c, "/registry/kept"); v != "before" {
			t.Errorf("restored value %q, want the snapshot's", v)
		}
	})
	for _, f := range []string{"pki/ca.crt", "pki/sa.key"} {
		a, _ := os.ReadFile(filepath.Join(string(d), f))
		b, _ := os.ReadFile(filepath.Join(string(fresh), f))
		if len(a) == 0 || !bytes.Equal(a, b) {
			t.Errorf("%s was not restored", f)
		}
	}
	aside, err := d.Restore(files)
	if err != nil || aside == "" {
		t.Fatalf("restore over a stopped plane: %q, %v", aside, err)
	}
	if _, err := os.Stat(filepath.Join(aside, "member")); err != nil {
		t.Errorf("the replaced etcd data is not kept aside: %v", err)
	}
	withEtcd(t, d, func(c *clientv3.Client) {
		if v := value(t, c, "/registry/kept"); v != "before" {
			t.Errorf("value after restoring over the plane %q, want the snapshot's", v)
		}
	})
}

// A crafted archive cannot make the restored state readable by others: it
// claims 0777 for the CA key and a file in a new directory, and the
// existing pki/ was left 0755; every file comes back 0600, every
// directory 0700.
func TestRestoreForcesPrivateModes(t *testing.T) {
	ctx := context.Background()
	d := StateDir(filepath.Join(t.TempDir(), "state"))
	if err := d.Prepare(); err != nil {
		t.Fatal(err)
	}
	if err := d.pki().ensure(time.Now()); err != nil {
		t.Fatal(err)
	}
	withEtcd(t, d, func(c *clientv3.Client) {
		if _, err := c.Put(ctx, "/registry/kept", "v"); err != nil {
			t.Fatal(err)
		}
	})
	files, err := d.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	files["pki/ca.key"] = backup.File{Data: files["pki/ca.key"].Data, Mode: 0o777}
	files["extra/deeper/note"] = backup.File{Data: []byte("x"), Mode: 0o666}
	archive, err := backup.Encode(backup.Meta{Kind: backup.Etcd, Created: time.Now(), Source: "crafted"}, files, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, crafted, err := backup.Decode(archive, nil)
	if err != nil {
		t.Fatal(err)
	}
	if crafted["pki/ca.key"].Mode != 0o777 {
		t.Fatalf("the crafted archive carries mode %v for pki/ca.key, want 0777: the test crafts nothing", crafted["pki/ca.key"].Mode)
	}
	if err := os.Chmod(filepath.Join(string(d), "pki"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Restore(crafted); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"pki/ca.key", "pki/ca.crt", "extra/deeper/note"} {
		fi, err := os.Stat(filepath.Join(string(d), name))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("restored %s: %v, %v; want mode 0600", name, fi.Mode(), err)
		}
	}
	for _, name := range []string{"pki", "extra", "extra/deeper"} {
		fi, err := os.Stat(filepath.Join(string(d), name))
		if err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("restored directory %s: %v, %v; want mode 0700", name, fi.Mode(), err)
		}
	}
}

// A state directory from before the etcd CA (etcd's serving certificate
// and the API server's client certificate signed by the plane's CA) is
// migrated when the plane prepares its certificates: etcd's data is all
// there afterwards, the plane's CA and the admin's certificate are kept,
// and the admin's certificate no longer opens etcd.
func TestOldStateDirMigratesToTheEtcdCAWithItsData(t *testing.T) {
	ctx := context.Background()
	d := StateDir(filepath.Join(t.TempDir(), "state"))
	if err := d.Prepare(); err != nil {
		t.Fatal(err)
	}
	p := d.pki()
	now := time.Now()
	if err := p.ensure(now); err != nil {
		t.Fatal(err)
	}
	// The old layout: no etcd/ directory, both certificates of the plane's CA.
	if err := os.RemoveAll(p.path("etcd")); err != nil {
		t.Fatal(err)
	}
	ca, err := certs.Load(p.caCert(), p.caKey())
	if err != nil {
		t.Fatal(err)
	}
	oldServing := leaf{name: legacyEtcdServing, commonName: "capstan-etcd", server: true, client: true}
	for _, l := range []leaf{oldServing, etcdClient} {
		if err := p.ensureLeaf(l, ca, now); err != nil {
			t.Fatal(err)
		}
	}
	ports, err := d.loadOrChoosePorts(0)
	if err != nil {
		t.Fatal(err)
	}
	oldTLS := transport.TLSInfo{CertFile: p.certFile(oldServing), KeyFile: p.keyFile(oldServing), TrustedCAFile: p.caCert(), ClientCertAuth: true}
	e, err := embedded.StartEtcd(ctx, embedded.EtcdConfig{Name: etcdMemberName, Dir: d.etcdDir(),
		ClientURL: loopbackURL("https", ports.EtcdClient), PeerURL: loopbackURL("https", ports.EtcdPeer),
		ClientTLS: oldTLS, PeerTLS: oldTLS, LogLevel: "error"})
	if err != nil {
		t.Fatal(err)
	}
	oldClient := etcdClientWith(t, ports, p.certFile(etcdClient), p.keyFile(etcdClient), p.caCert())
	if _, err := oldClient.Put(ctx, "/registry/secrets/default/kept", "before the etcd CA"); err != nil {
		t.Fatal(err)
	}
	oldClient.Close()
	e.Close()

	adminBefore, _ := os.ReadFile(p.certFile(adminClient))
	caBefore, _ := os.ReadFile(p.caCert())
	if err := p.ensure(time.Now()); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.ReadFile(p.caCert()); !bytes.Equal(after, caBefore) {
		t.Error("the plane's CA was replaced")
	}
	if after, _ := os.ReadFile(p.certFile(adminClient)); !bytes.Equal(after, adminBefore) {
		t.Error("the admin's certificate was replaced: kubeconfigs in use would break")
	}
	for _, f := range []string{p.certFile(oldServing), p.keyFile(oldServing)} {
		if _, err := os.Stat(f); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the old etcd serving pair is still there: %s (%v)", f, err)
		}
	}
	withEtcd(t, d, func(c *clientv3.Client) {
		if got := value(t, c, "/registry/secrets/default/kept"); got != "before the etcd CA" {
			t.Errorf("after the migration etcd holds %q, want the data written before it", got)
		}
		admin := etcdClientWith(t, ports, p.certFile(adminClient), p.keyFile(adminClient), p.etcdCACert())
		defer admin.Close()
		short, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		if _, err := admin.Get(short, "/registry/secrets/default/kept"); err == nil {
			t.Error("the admin's certificate (the plane's CA) opens etcd")
		}
	})
}

// etcdClientWith is an etcd client of d's etcd with the given credentials.
func etcdClientWith(t *testing.T, ports Ports, cert, key, ca string) *clientv3.Client {
	t.Helper()
	tlsCfg, err := transport.TLSInfo{CertFile: cert, KeyFile: key, TrustedCAFile: ca}.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	u := loopbackURL("https", ports.EtcdClient)
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{u.String()}, TLS: tlsCfg, DialTimeout: 3 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
