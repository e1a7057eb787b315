package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/grpclog"

	"capstan.dev/capstan/internal/backup"
	"capstan.dev/capstan/internal/mgmt"
	"capstan.dev/capstan/internal/move"
)

func init() {
	register(newBackupCommand)
	register(newRestoreCommand)
}

type backupOptions struct {
	to, from     string
	keyFile      string
	kubeconfig   string
	namespace    string
	pauseTimeout time.Duration
}

// key reads --encryption-key-file, if given.
func (o *backupOptions) key() ([]byte, error) {
	if o.keyFile == "" {
		return nil, nil
	}
	key, err := backup.ReadKeyFile(o.keyFile)
	if err != nil {
		return nil, fmt.Errorf("--encryption-key-file: %w", err)
	}
	return key, nil
}

func newBackupCommand(g *globals) *cobra.Command {
	o := &backupOptions{}
	cmd := &cobra.Command{
		Use:   "backup --to FILE",
		Short: "Write a snapshot of the management plane (or of another management cluster's Cluster API objects) to a file",
		Long: `Write a consistent snapshot to a file (mode 0600: it holds secrets), optionally
encrypted with a key file (AES-256-GCM; 32 bytes, raw, base64 or hex).

Without --kubeconfig, the snapshot is of the embedded management plane in
--state-dir: an etcd snapshot, taken from the running plane or, when it is
stopped, from its data, with the plane's credentials. capstan restore brings
it back into the same or a new state directory.

With --kubeconfig, the snapshot is of that management cluster's Cluster API
objects and their secrets, read as capstan move reads them: the Clusters are
paused while their objects are read, then unpaused. capstan restore
--kubeconfig creates them in a management cluster as a move does.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.backup(cmd, g)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.to, "to", "", "file to write the snapshot to (replaced atomically)")
	f.StringVar(&o.keyFile, "encryption-key-file", "", "encrypt the snapshot with the 32-byte key in this file")
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "back up this management cluster's Cluster API objects instead of the embedded plane")
	f.StringVarP(&o.namespace, "namespace", "n", "", "with --kubeconfig, only the clusters of this namespace (default: every namespace)")
	f.DurationVar(&o.pauseTimeout, "pause-timeout", 2*time.Minute, "with --kubeconfig, how long to wait until the controllers report the clusters paused; 0 does not wait")
	return cmd
}

func (o *backupOptions) backup(cmd *cobra.Command, g *globals) error {
	if o.to == "" {
		return errors.New("--to is required: the file to write the snapshot to")
	}
	if o.namespace != "" && o.kubeconfig == "" {
		return errors.New("--namespace applies only with --kubeconfig: a plane's snapshot holds all of it")
	}
	// Everything that can be checked is, before the source is touched.
	key, err := o.key()
	if err != nil {
		return err
	}
	if err := probeWritable(filepath.Dir(o.to)); err != nil {
		return fmt.Errorf("--to %s: %w", o.to, err)
	}
	ctx := cmd.Context()
	started := time.Now()
	meta := backup.Meta{Created: started.UTC()}
	var files backup.Files
	if o.kubeconfig == "" {
		dir, err := g.dir()
		if err != nil {
			return err
		}
		meta.Kind, meta.Source = backup.Etcd, string(dir)
		// gRPC's own logger reports the dials the etcd client cancels as
		// it closes; set before any gRPC use, as gRPC requires.
		grpclog.SetLoggerV2(grpclog.NewLoggerV2(io.Discard, io.Discard, os.Stderr))
		if files, err = dir.Snapshot(ctx); err != nil {
			return err
		}
	} else {
		meta.Kind = backup.Objects
		if files, meta.Source, err = o.snapshotObjects(cmd, g); err != nil {
			return err
		}
	}
	if err := backup.Write(o.to, meta, files, key); err != nil {
		return fmt.Errorf("writing %s: %w", o.to, err)
	}
	size := int64(0)
	if fi, err := os.Stat(o.to); err == nil {
		size = fi.Size()
	}
	encrypted := ""
	if key != nil {
		encrypted = ", encrypted"
	}
	fmt.Fprintf(cmd.OutOrStdout(), "Backed up %s to %s (%d files, %.1f MiB%s) in %.1fs.\n",
		meta.Source, o.to, len(files), float64(size)/(1<<20), encrypted, time.Since(started).Seconds())
	if key == nil {
		fmt.Fprintln(cmd.ErrOrStderr(), unencryptedWarning(o.to, meta.Kind, files))
	}
	return nil
}

// unencryptedWarning says what an unencrypted snapshot gives whoever reads
// it, file by file, since nothing but the file's mode protects it.
func unencryptedWarning(name string, kind backup.Kind, files backup.Files) string {
	names := slices.Sorted(maps.Keys(files))
	what := "the Cluster API objects and their Secrets (each workload cluster's kubeconfig, CA and service-account keys)"
	if kind == backup.Etcd {
		what = "the plane's etcd data (every object and Secret, among them each workload cluster's kubeconfig and CA keys), " +
			"the key that encrypts those Secrets at rest, and the plane's CA and service-account keys"
	}
	return fmt.Sprintf("Warning: %s is not encrypted and not authenticated: whoever can read it holds %s, and a change to it goes unnoticed until it is restored. "+
		"Keep it as private as the state directory, or back up with --encryption-key-file. It holds: %s.",
		name, what, strings.Join(names, ", "))
}

// snapshotObjects copies the Cluster API objects of --kubeconfig's cluster
// through a private temporary directory.
func (o *backupOptions) snapshotObjects(cmd *cobra.Command, g *globals) (backup.Files, string, error) {
	target := &mgmtTarget{kubeconfig: o.kubeconfig}
	cfg, err := target.restConfig(g)
	if err != nil {
		return nil, "", err
	}
	c, err := moveClient(cfg)
	if err != nil {
		return nil, "", target.kubeconfigError(target.loadingRules(g), err)
	}
	tmp, err := os.MkdirTemp("", "capstan-backup-")
	if err != nil {
		return nil, "", err
	}
	defer os.RemoveAll(tmp)
	if err := move.Snapshot(cmd.Context(), c, tmp, move.Options{Namespace: o.namespace, PauseTimeout: o.pauseTimeout}); err != nil {
		return nil, "", err
	}
	files, err := readDirFiles(tmp)
	return files, cfg.Host, err
}

func newRestoreCommand(g *globals) *cobra.Command {
	o := &backupOptions{}
	cmd := &cobra.Command{
		Use:   "restore --from FILE",
		Short: "Bring back a snapshot written by capstan backup",
		Long: `Bring back a snapshot written by capstan backup. The whole file is read and
checked (its key, every byte) before anything changes.

A snapshot of the embedded plane is restored into --state-dir, new or holding
a stopped plane (whose etcd data is kept aside); then capstan up starts the
restored plane, and its controllers carry on with the clusters and machines
it held: nothing is created anew.

A snapshot of a management cluster's objects (capstan backup --kubeconfig) is
restored with --kubeconfig into a management cluster with the same providers:
the objects are created paused, with their status, and unpaused once all are
there, as capstan move does. Run again, an interrupted restore continues.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.restore(cmd, g)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.from, "from", "", "snapshot file written by capstan backup")
	f.StringVar(&o.keyFile, "encryption-key-file", "", "key file the snapshot was encrypted with")
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "restore a snapshot of Cluster API objects into this management cluster")
	return cmd
}

func (o *backupOptions) restore(cmd *cobra.Command, g *globals) error {
	if o.from == "" {
		return errors.New("--from is required: the snapshot file to restore")
	}
	key, err := o.key()
	if err != nil {
		return err
	}
	meta, files, err := backup.Read(o.from, key)
	if err != nil {
		return fmt.Errorf("--from: %w", err)
	}
	out := cmd.OutOrStdout()
	switch {
	case meta.Kind == backup.Etcd && o.kubeconfig != "":
		return fmt.Errorf("%s is a snapshot of an embedded plane (%s): restore it into a state directory with --state-dir, without --kubeconfig", o.from, meta.Source)
	case meta.Kind == backup.Objects && o.kubeconfig == "":
		return fmt.Errorf("%s is a snapshot of a management cluster's objects (%s): restore it into a management cluster with --kubeconfig", o.from, meta.Source)
	case meta.Kind == backup.Etcd:
		dir, err := g.dir()
		if err != nil {
			return err
		}
		aside, err := dir.Restore(files)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "Restored the plane backed up from %s on %s into %s.\n", meta.Source, meta.Created.Format(time.RFC3339), dir)
		if aside != "" {
			fmt.Fprintf(out, "The etcd data it replaced is in %s; remove it once the restored plane serves.\n", aside)
		}
		fmt.Fprintf(out, "Start it with: capstan up%s\n", stateDirFlag(dir))
		return nil
	case meta.Kind == backup.Objects:
		return o.restoreObjects(cmd, g, meta, files)
	default:
		return fmt.Errorf("%s holds a snapshot of kind %q, which this capstan does not know: restore it with the capstan version that wrote it", o.from, meta.Kind)
	}
}

func (o *backupOptions) restoreObjects(cmd *cobra.Command, g *globals, meta backup.Meta, files backup.Files) error {
	target := &mgmtTarget{kubeconfig: o.kubeconfig}
	cfg, err := target.restConfig(g)
	if err != nil {
		return err
	}
	c, err := moveClient(cfg)
	if err != nil {
		return target.kubeconfigError(target.loadingRules(g), err)
	}
	tmp, err := os.MkdirTemp("", "capstan-restore-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	for name, f := range files {
		if filepath.Dir(name) != "." {
			return fmt.Errorf("%s holds %s, which a snapshot of objects never does", o.from, name)
		}
		if err := os.WriteFile(filepath.Join(tmp, name), f.Data, 0o600); err != nil {
			return err
		}
	}
	if err := move.Restore(cmd.Context(), tmp, c, move.Options{}); err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "Restored %d objects backed up from %s on %s into %s; their Clusters are unpaused.\n",
		len(files), meta.Source, meta.Created.Format(time.RFC3339), cfg.Host)
	return nil
}

// readDirFiles reads the regular files of dir (not below it).
func readDirFiles(dir string) (backup.Files, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	files := backup.Files{}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		files[e.Name()] = backup.File{Data: data, Mode: 0o600}
	}
	return files, nil
}

// probeWritable proves that files can be created in dir, so that a
// command fails before it changes anything rather than at its end.
func probeWritable(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".capstan-probe-*")
	if err != nil {
		return fmt.Errorf("cannot write there: %w", err)
	}
	f.Close()
	return os.Remove(f.Name())
}

// scheduledBackups is the schedule `capstan up --backup-every` runs in the
// plane's process.
func scheduledBackups(dir mgmt.StateDir, o *upOptions) (*backup.Schedule, error) {
	if o.backupEvery == 0 {
		return nil, nil
	}
	s := &backup.Schedule{Dir: o.backupDir, Every: o.backupEvery, Keep: o.backupKeep}
	if s.Dir == "" {
		s.Dir = dir.BackupDir()
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	var key []byte
	if o.backupKeyFile != "" {
		var err error
		if key, err = backup.ReadKeyFile(o.backupKeyFile); err != nil {
			return nil, fmt.Errorf("--backup-encryption-key-file: %w", err)
		}
	}
	if err := probeWritable(s.Dir); err != nil {
		return nil, fmt.Errorf("--backup-dir %s: %w", s.Dir, err)
	}
	s.Take = func(ctx context.Context, path string) error {
		files, err := dir.Snapshot(ctx)
		if err != nil {
			return err
		}
		return backup.Write(path, backup.Meta{Kind: backup.Etcd, Created: time.Now().UTC(), Source: string(dir)}, files, key)
	}
	return s, nil
}
