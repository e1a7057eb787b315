package mgmt

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.uber.org/zap"

	"capstan.dev/capstan/internal/atomicfile"
	"capstan.dev/capstan/internal/backup"
)

// etcdSnapshotFile is the etcd snapshot's name inside a plane's backup.
const etcdSnapshotFile = "etcd.db"

// notBackedUp are the state directory's entries a backup leaves out: the
// etcd data (the snapshot stands for it), the local provider's machines,
// what a start writes afresh (ports, run file, kubeconfig, log, lock, the
// console's URL with its token, stale once restored) and scheduled backups. Everything else (the CA and keys under pki/, and
// whatever key a later version keeps there) goes into the backup, since
// the stored objects are only usable with it: service account tokens are
// signed with its key.
var notBackedUp = map[string]bool{
	"etcd": true, "local": true, "backups": true, "apiserver": true,
	"capstan.lock": true, "run.json": true, "ports.json": true, "kubeconfig": true,
	"capstan.log": true, "capstan.log.1": true, "console.json": true,
}

// BackupDir is where `capstan up --backup-every` writes by default.
func (d StateDir) BackupDir() string { return d.path("backups") }

// Snapshot takes a consistent snapshot of the plane in d: etcd's own
// snapshot of its data (taken through the running plane's etcd, or, when
// none runs, from an etcd started for the purpose while d is locked) and
// the files a restored plane needs.
func (d StateDir) Snapshot(ctx context.Context) (backup.Files, error) {
	if !d.hasEtcdData() {
		return nil, fmt.Errorf("state directory %s holds no management plane (no etcd data): check --state-dir", d)
	}
	var ports Ports
	if err := readJSON(d.portsPath(), &ports); err != nil {
		return nil, fmt.Errorf("reading %s: %w", d.portsPath(), err)
	}
	if running, _ := d.Running(); !running {
		lock, err := d.TryLock()
		if err == nil {
			defer lock.Release()
			// Closing etcd right after its snapshot logs errors about
			// its listeners closing; only a failure to start matters,
			// and that is returned.
			// A state directory from before the etcd CA is migrated
			// first, as a start would (pki.ensureEtcd).
			if err := d.pki().ensureEtcd(time.Now()); err != nil {
				return nil, fmt.Errorf("preparing etcd's certificates in %s: %w", d.pki().dir, err)
			}
			e, err := startEtcd(ctx, d, ports, "fatal")
			if err != nil {
				return nil, fmt.Errorf("starting etcd to snapshot it: %w", err)
			}
			defer e.Close()
		} else if !errors.Is(err, ErrInUse) {
			return nil, err
		}
		// ErrInUse: a plane started meanwhile; its etcd answers.
	}
	db, err := d.etcdSnapshot(ctx, ports)
	if err != nil {
		return nil, err
	}
	files := backup.Files{etcdSnapshotFile: {Data: db, Mode: 0o600}}
	err = filepath.WalkDir(string(d), func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(string(d), path)
		if rel == "." {
			return nil
		}
		if notBackedUp[rel] || strings.HasPrefix(e.Name(), ".") || strings.HasPrefix(rel, "etcd.before-restore-") {
			if e.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if !e.Type().IsRegular() {
			return nil
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files[filepath.ToSlash(rel)] = backup.File{Data: data, Mode: info.Mode().Perm()}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", d, err)
	}
	return files, nil
}

// etcdSnapshot streams etcd's snapshot of its data (one consistent
// revision) with the plane's etcd client credentials.
func (d StateDir) etcdSnapshot(ctx context.Context, ports Ports) ([]byte, error) {
	cli, err := d.etcdClient(ports)
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	rc, err := cli.Snapshot(ctx)
	if err != nil {
		return nil, fmt.Errorf("etcd snapshot: %w", err)
	}
	defer rc.Close()
	db, err := io.ReadAll(rc)
	if err != nil {
		return nil, fmt.Errorf("etcd snapshot: %w", err)
	}
	if err := checkEtcdSnapshot(db); err != nil {
		return nil, err
	}
	return db, nil
}

// etcdClient connects to the plane's etcd with the API server's client
// credentials.
func (d StateDir) etcdClient(ports Ports) (*clientv3.Client, error) {
	p := d.pki()
	tlsCfg, err := transport.TLSInfo{CertFile: p.certFile(etcdClient), KeyFile: p.keyFile(etcdClient), TrustedCAFile: p.etcdCACert()}.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("etcd client credentials in %s: %w", p.dir, err)
	}
	u := loopbackURL("https", ports.EtcdClient)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{u.String()}, TLS: tlsCfg, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, fmt.Errorf("connecting to etcd at %s: %w", u.String(), err)
	}
	return cli, nil
}

// checkEtcdSnapshot verifies the SHA-256 etcd appends to a snapshot.
func checkEtcdSnapshot(db []byte) error {
	if len(db) <= sha256.Size {
		return errors.New("the etcd snapshot is empty or truncated")
	}
	body := db[:len(db)-sha256.Size]
	sum := sha256.Sum256(body)
	if !bytes.Equal(sum[:], db[len(body):]) {
		return errors.New("the etcd snapshot does not match its own SHA-256")
	}
	return nil
}

// RestoreError is a restore into a state directory that a plane holds.
type RestoreError struct{ InUse *InUseError }

func (e *RestoreError) Error() string {
	who := "a capstan process"
	if e.InUse.PID > 0 {
		who = fmt.Sprintf("capstan process %d", e.InUse.PID)
	}
	return fmt.Sprintf("state directory %s is in use by %s; a running plane cannot be restored under it: stop it with `capstan down --state-dir %s` and run the restore again, or restore into another --state-dir", e.InUse.Dir, who, e.InUse.Dir)
}

// Restore makes d hold the plane a Snapshot recorded: etcd's data rebuilt
// from the snapshot (a single member on d's ports), and the plane's files.
// d may be new or hold a stopped plane, whose etcd data is kept aside
// (its path is returned). The snapshot is checked before anything in d
// changes; `capstan up` then starts the restored plane.
func (d StateDir) Restore(files backup.Files) (aside string, err error) {
	db, ok := files[etcdSnapshotFile]
	if !ok {
		return "", errors.New("the snapshot holds no etcd data: it was not taken of an embedded plane (restore it with --kubeconfig into a management cluster)")
	}
	if err := checkEtcdSnapshot(db.Data); err != nil {
		return "", err
	}
	for name := range files {
		if name != etcdSnapshotFile && notBackedUp[strings.SplitN(name, "/", 2)[0]] {
			return "", fmt.Errorf("the snapshot holds %s, which a plane's backup never does: it is not a capstan backup of a plane", name)
		}
	}
	if running, pid := d.Running(); running {
		return "", &RestoreError{InUse: &InUseError{Dir: d, PID: pid}}
	}
	if err := d.Prepare(); err != nil {
		return "", err
	}
	lock, err := d.TryLock()
	if errors.Is(err, ErrInUse) {
		_, pid := d.Running()
		return "", &RestoreError{InUse: &InUseError{Dir: d, PID: pid}}
	}
	if err != nil {
		return "", err
	}
	defer lock.Release()

	ports, err := d.loadOrChoosePorts(0)
	if err != nil {
		return "", err
	}
	staging, err := os.MkdirTemp(string(d), ".restore-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(staging)
	dbPath := filepath.Join(staging, etcdSnapshotFile)
	if err := os.WriteFile(dbPath, db.Data, 0o600); err != nil {
		return "", err
	}
	peer := loopbackURL("https", ports.EtcdPeer)
	err = snapshot.NewV3(zap.NewNop()).Restore(snapshot.RestoreConfig{
		SnapshotPath:        dbPath,
		Name:                etcdMemberName,
		OutputDataDir:       filepath.Join(staging, "etcd"),
		PeerURLs:            []string{peer.String()},
		InitialCluster:      etcdMemberName + "=" + peer.String(),
		InitialClusterToken: "capstan",
		// Revisions move far ahead of any a client of the old plane
		// saw, and what lies between reads as compacted: a watch that
		// resumes from an old resourceVersion relists instead of
		// missing what happened since.
		RevisionBump:  1_000_000_000,
		MarkCompacted: true,
	})
	if err != nil {
		return "", fmt.Errorf("rebuilding etcd's data from the snapshot: %w", err)
	}

	for name, f := range files {
		if name == etcdSnapshotFile {
			continue
		}
		target := filepath.Join(string(d), filepath.FromSlash(name))
		// The archive's modes are not trusted (a crafted one restored
		// pki/ca.key 0777): the state's files and directories hold keys
		// and are their owner's alone, whatever the archive says.
		if err := privateDirs(string(d), filepath.Dir(target)); err != nil {
			return "", err
		}
		if err := atomicfile.WriteFile(target, f.Data, 0o600); err != nil {
			return "", fmt.Errorf("writing %s: %w", name, err)
		}
	}
	if _, err := os.Stat(d.etcdDir()); err == nil {
		aside = d.path("etcd.before-restore-" + time.Now().UTC().Format("20060102T150405Z"))
		if err := os.Rename(d.etcdDir(), aside); err != nil {
			return "", fmt.Errorf("keeping the old etcd data aside: %w", err)
		}
	}
	if err := os.Rename(filepath.Join(staging, "etcd"), d.etcdDir()); err != nil {
		return aside, fmt.Errorf("putting the restored etcd data in place: %w (the old data is in %s)", err, aside)
	}
	d.clearRunInfo()
	return aside, nil
}

// privateDirs makes dir and every directory between it and root (root
// excluded) exist with mode 0700, tightening those that exist.
func privateDirs(root, dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for ; dir != root && strings.HasPrefix(dir, root+string(filepath.Separator)); dir = filepath.Dir(dir) {
		if err := os.Chmod(dir, 0o700); err != nil {
			return err
		}
	}
	return nil
}
