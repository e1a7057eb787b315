package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Bad backup, restore and schedule flags are refused before anything
// runs, each error naming the flag and the fix; a state directory that
// holds no plane is refused by name.
func TestBackupFlagsRefused(t *testing.T) {
	dir := t.TempDir()
	shortKey := filepath.Join(dir, "short.key")
	if err := os.WriteFile(shortKey, []byte("0123456789abcdef"), 0o600); err != nil {
		t.Fatal(err)
	}
	notASnapshot := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(notASnapshot, []byte("hello\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty-state")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"backup"}, "--to is required"},
		{[]string{"backup", "--to", filepath.Join(dir, "b"), "-n", "x"}, "--namespace applies only with --kubeconfig"},
		{[]string{"backup", "--to", filepath.Join(dir, "b"), "--encryption-key-file", shortKey}, "needs exactly 32 bytes"},
		{[]string{"backup", "--to", "/proc/x/b", "--state-dir", empty}, "--to /proc/x/b"},
		{[]string{"backup", "--to", filepath.Join(dir, "b"), "--state-dir", empty}, "holds no management plane"},
		{[]string{"restore"}, "--from is required"},
		{[]string{"restore", "--from", notASnapshot, "--state-dir", empty}, "not a capstan snapshot"},
		{[]string{"up", "--state-dir", empty, "--backup-every", "-1h"}, "--backup-every must be a positive duration"},
		{[]string{"up", "--state-dir", empty, "--backup-every", "1h", "--backup-keep", "0"}, "--backup-keep must be at least 1"},
		{[]string{"up", "--state-dir", empty, "--backup-every", "1h", "--backup-dir", "/proc/x"}, "--backup-dir /proc/x"},
	} {
		_, _, err := runCapstan(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("capstan %s: %v; want an error saying %q", strings.Join(c.args, " "), err, c.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "b")); !os.IsNotExist(err) {
		t.Errorf("a refused backup wrote its file (%v)", err)
	}
	if _, err := os.Stat(filepath.Join(empty, "etcd")); !os.IsNotExist(err) {
		t.Errorf("a refused command created etcd data in %s (%v)", empty, err)
	}
}

// A backup written without a key warns, on stderr, that it is neither
// encrypted nor authenticated and names every file it holds; an encrypted
// one does not warn.
func TestUnencryptedBackupWarns(t *testing.T) {
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain.snapshot")
	_, errOut, err := runCapstan(t, "backup", "--state-dir", env.StateDir, "--to", plain)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Warning: " + plain + " is not encrypted and not authenticated", "--encryption-key-file", "etcd.db", "pki/ca.key", "pki/encryption-config.yaml"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr of an unencrypted backup:\n%s\nwant %q", errOut, want)
		}
	}
	key := filepath.Join(dir, "key")
	if err := os.WriteFile(key, []byte("0123456789abcdef0123456789abcdef"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, errOut, err = runCapstan(t, "backup", "--state-dir", env.StateDir, "--to", filepath.Join(dir, "sealed.snapshot"), "--encryption-key-file", key)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(errOut, "Warning") {
		t.Errorf("an encrypted backup warned:\n%s", errOut)
	}
}

// With no state directory (no $HOME to default to, or an empty
// --state-dir) the commands of the embedded plane refuse and name the fix,
// instead of using the working directory or a guessable shared one.
func TestNoStateDirIsRefused(t *testing.T) {
	to := filepath.Join(t.TempDir(), "b")
	for _, args := range [][]string{
		{"up", "--state-dir", ""},
		{"down", "--state-dir", ""},
		{"status", "--state-dir", ""},
		{"backup", "--to", to, "--state-dir", ""},
		{"init", "--infrastructure", "local", "--state-dir", ""},
	} {
		_, _, err := runCapstan(t, args...)
		if err == nil || !strings.Contains(err.Error(), "pass --state-dir") {
			t.Errorf("capstan %s: %v; want a refusal saying to pass --state-dir", strings.Join(args, " "), err)
		}
	}
}
