package backup

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"capstan.dev/capstan/test/fixture"
)

var someFiles = Files{
	"etcd.db":    {Data: bytes.Repeat([]byte("kv"), 1000), Mode: 0o600},
	"pki/ca.crt": {Data: []byte("certificate"), Mode: 0o644},
}

func writeKey(t *testing.T, content []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(p, content, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// A snapshot comes back as it was written, with and without a key; the
// file has mode 0600; the wrong key, a missing key, a superfluous key and
// every corruption are refused by Read.
func TestRoundTripAndRefusals(t *testing.T) {
	dir := t.TempDir()
	key := bytes.Repeat([]byte{7}, KeySize)
	other := bytes.Repeat([]byte{8}, KeySize)
	for _, k := range [][]byte{nil, key} {
		name := filepath.Join(dir, "s")
		if err := Write(name, Meta{Kind: Etcd, Source: "here"}, someFiles, k); err != nil {
			t.Fatal(err)
		}
		if fi, err := os.Stat(name); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("mode %v, %v; want 0600", fi.Mode(), err)
		}
		m, files, err := Read(name, k)
		if err != nil {
			t.Fatal(err)
		}
		if m.Kind != Etcd || m.Encrypted != (k != nil) || len(files) != 2 ||
			!bytes.Equal(files["etcd.db"].Data, someFiles["etcd.db"].Data) || files["pki/ca.crt"].Mode != 0o644 {
			t.Errorf("read back %+v, %d files", m, len(files))
		}
		raw, _ := os.ReadFile(name)
		if k != nil && bytes.Contains(raw, []byte("certificate")) {
			t.Error("an encrypted snapshot holds a file in the clear")
		}
		// Flip one byte at a time across the payload and the metadata.
		for _, at := range []int{len(raw) - 1, len(raw) / 2, len(magic) + 5} {
			bad := bytes.Clone(raw)
			bad[at] ^= 0x01
			if _, _, err := Decode(bad, k); err == nil {
				t.Errorf("key %v: a snapshot with byte %d flipped was accepted", k != nil, at)
			}
		}
		if _, _, err := Decode(raw[:len(raw)-10], k); err == nil {
			t.Errorf("key %v: a truncated snapshot was accepted", k != nil)
		}
	}
	name := filepath.Join(dir, "s") // encrypted, from the last round
	for what, c := range map[string]struct {
		key  []byte
		want string
	}{
		"no key":    {nil, "encrypted: give its key"},
		"wrong key": {other, "cannot be decrypted"},
	} {
		if _, _, err := Read(name, c.key); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want an error saying %q", what, err, c.want)
		}
	}
	plain := filepath.Join(dir, "plain")
	if err := Write(plain, Meta{Kind: Objects}, someFiles, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Read(plain, key); err == nil || !strings.Contains(err.Error(), "not encrypted") {
		t.Errorf("a key for a plain snapshot: %v", err)
	}
	if _, _, err := Decode([]byte("hello\n"), nil); err == nil || !strings.Contains(err.Error(), "not a capstan snapshot") {
		t.Errorf("another file: %v", err)
	}
}

// A key file holds 32 bytes, raw, base64 or hex; anything else is refused
// with the size and how to make a key.
func TestReadKeyFile(t *testing.T) {
	raw := bytes.Repeat([]byte{1}, KeySize)
	for what, content := range map[string][]byte{
		"raw":    raw,
		"base64": []byte("AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=\n"),
		"hex":    []byte(strings.Repeat("01", KeySize) + "\n"),
	} {
		k, err := ReadKeyFile(writeKey(t, content))
		if err != nil || !bytes.Equal(k, raw) {
			t.Errorf("%s: %x, %v", what, k, err)
		}
	}
	for what, content := range map[string][]byte{
		"16 bytes": bytes.Repeat([]byte{1}, 16),
		"text":     []byte("my secret password"),
		"empty":    nil,
	} {
		_, err := ReadKeyFile(writeKey(t, content))
		if err == nil || !strings.Contains(err.Error(), "needs exactly 32 bytes") || !strings.Contains(err.Error(), "/dev/urandom") {
			t.Errorf("%s: %v; want the size and how to make a key", what, err)
		}
	}
	if _, err := ReadKeyFile(filepath.Join(t.TempDir(), "missing")); err == nil || !strings.Contains(err.Error(), "key file") {
		t.Errorf("missing key file: %v", err)
	}
	// A key others can read is refused, with the chmod that fixes it.
	open := writeKey(t, raw)
	if err := os.Chmod(open, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadKeyFile(open); err == nil || !strings.Contains(err.Error(), "chmod 600 "+open) {
		t.Errorf("a key file of mode 0644: %v; want a refusal saying chmod 600", err)
	}
}

// A snapshot naming a path outside its directory is refused.
func TestPayloadPathsStayInside(t *testing.T) {
	for _, n := range []string{"../x", "/etc/passwd", "a/../../b", ""} {
		if _, err := pack(Files{n: {Data: []byte("x")}}); err == nil {
			t.Errorf("%q was packed", n)
		}
	}
}

// The schedule, at a short interval, takes snapshots and keeps the newest
// Keep of them, oldest removed first, leaving other files alone.
func TestScheduleKeepsNewest(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "backups")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "manual.backup"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var taken atomic.Int32
	s := Schedule{Dir: dir, Every: 20 * time.Millisecond, Keep: 3, Log: logr.Discard(),
		Take: func(_ context.Context, path string) error {
			taken.Add(1)
			return Write(path, Meta{Kind: Etcd}, someFiles, nil)
		}}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	fixture.Eventually(t, "six snapshots taken", 30*time.Second, func(context.Context) string {
		return fixture.Unless(taken.Load() >= 6, fmt.Sprintf("%d taken so far", taken.Load()))
	})
	cancel()
	<-done
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var scheduled []string
	manual := false
	for _, e := range entries {
		if e.Name() == "manual.backup" {
			manual = true
			continue
		}
		scheduled = append(scheduled, e.Name())
	}
	if len(scheduled) != 3 || !manual {
		t.Errorf("left %v (manual kept: %v); want the 3 newest scheduled ones and the manual one", scheduled, manual)
	}

	// Which ones: Once with known times removes the oldest.
	dir2 := t.TempDir()
	s.Dir, s.Keep = dir2, 2
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var paths []string
	for i := range 4 {
		p, _, err := s.Once(context.Background(), base.Add(time.Duration(i)*time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	for i, p := range paths {
		_, err := os.Stat(p)
		if kept := err == nil; kept != (i >= 2) {
			t.Errorf("snapshot %d (%s) kept %v", i, filepath.Base(p), kept)
		}
	}
}

func TestScheduleValidate(t *testing.T) {
	for _, s := range []Schedule{{Every: 0, Keep: 1}, {Every: time.Hour, Keep: 0}} {
		if err := s.Validate(); err == nil || !strings.Contains(err.Error(), "--backup-") {
			t.Errorf("%+v: %v", s, err)
		}
	}
}
