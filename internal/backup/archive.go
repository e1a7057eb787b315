package backup

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	"capstan.dev/capstan/internal/atomicfile"
)

// magic is the first line of every snapshot file.
const magic = "capstan-backup v1"

// Kind says what a snapshot's payload holds.
type Kind string

const (
	// Etcd is an embedded plane's snapshot: an etcd snapshot and the
	// plane's credentials.
	Etcd Kind = "etcd"
	// Objects is another management cluster's Cluster API objects and
	// their secrets.
	Objects Kind = "objects"
)

// FileMode is the mode of every snapshot file: they hold secrets.
const FileMode os.FileMode = 0o600

// KeySize is the size of an encryption key: AES-256.
const KeySize = 32

// Meta is a snapshot's metadata line.
type Meta struct {
	Kind      Kind      `json:"kind"`
	Created   time.Time `json:"created"`
	Encrypted bool      `json:"encrypted"`
	// Source names where the snapshot was taken (a state directory or an
	// API server), for the user's benefit only.
	Source string `json:"source,omitempty"`
}

// Files are a payload's files by slash-separated relative path.
type Files map[string]File

// File is one file of a payload.
type File struct {
	Data []byte
	Mode os.FileMode
}

// ReadKeyFile reads an encryption key: exactly KeySize bytes, raw or in
// base64 (what `openssl rand -base64 32` prints).
func ReadKeyFile(name string) ([]byte, error) {
	fi, err := os.Stat(name)
	if err != nil {
		return nil, fmt.Errorf("reading the key file: %w", err)
	}
	// A key others can read protects nothing: refuse it, as ssh refuses
	// an open private key, rather than seal snapshots with it.
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("key file %s has mode %#o, so other users can read it: run `chmod 600 %s`", name, perm, name)
	}
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("reading the key file: %w", err)
	}
	if len(b) == KeySize {
		return b, nil
	}
	text := strings.TrimSpace(string(b))
	if k, err := base64.StdEncoding.DecodeString(text); err == nil && len(k) == KeySize {
		return k, nil
	}
	if k, err := hex.DecodeString(text); err == nil && len(k) == KeySize {
		return k, nil
	}
	return nil, fmt.Errorf("key file %s holds %d bytes, which is neither a %d-byte key nor one in base64 or hex; AES-256 needs exactly %d bytes: create one with `head -c %d /dev/urandom > %s` (keep it apart from the snapshots)",
		name, len(b), KeySize, KeySize, KeySize, name)
}

// Write writes a snapshot of files to name atomically, with mode 0600,
// sealed with key when key is not nil.
func Write(name string, m Meta, files Files, key []byte) error {
	b, err := Encode(m, files, key)
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(name, b, FileMode)
}

// Encode is the content of a snapshot file.
func Encode(m Meta, files Files, key []byte) ([]byte, error) {
	payload, err := pack(files)
	if err != nil {
		return nil, err
	}
	m.Encrypted = key != nil
	metaLine, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	out.WriteString(magic + "\n")
	out.Write(metaLine)
	out.WriteByte('\n')
	if key == nil {
		// The trailer is the hash of everything before it.
		out.Write(payload)
		sum := sha256.Sum256(out.Bytes())
		out.Write(sum[:])
		return out.Bytes(), nil
	}
	gcm, err := newGCM(key)
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, gcm.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	out.Write(nonce)
	out.Write(gcm.Seal(nil, nonce, payload, metaLine))
	return out.Bytes(), nil
}

// Read reads and checks a snapshot file: its format, its key (given when
// and only when the snapshot is encrypted) and every byte of its payload.
func Read(name string, key []byte) (Meta, Files, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return Meta{}, nil, err
	}
	m, files, err := Decode(b, key)
	if err != nil {
		return m, nil, fmt.Errorf("%s: %w", name, err)
	}
	return m, files, nil
}

// Decode is Read of a file's content.
func Decode(b []byte, key []byte) (Meta, Files, error) {
	var m Meta
	r := bufio.NewReader(bytes.NewReader(b))
	first, err := r.ReadString('\n')
	if err != nil || strings.TrimSuffix(first, "\n") != magic {
		return m, nil, errors.New("not a capstan snapshot (it does not start with \"" + magic + "\")")
	}
	metaLine, err := r.ReadBytes('\n')
	if err != nil {
		return m, nil, errors.New("the snapshot is truncated: its metadata line is incomplete")
	}
	metaLine = bytes.TrimSuffix(metaLine, []byte("\n"))
	if err := json.Unmarshal(metaLine, &m); err != nil {
		return m, nil, fmt.Errorf("the snapshot's metadata line is corrupt: %w", err)
	}
	rest := b[len(first)+len(metaLine)+1:]
	var payload []byte
	switch {
	case m.Encrypted && key == nil:
		return m, nil, errors.New("the snapshot is encrypted: give its key with --encryption-key-file")
	case !m.Encrypted && key != nil:
		return m, nil, errors.New("the snapshot is not encrypted, yet --encryption-key-file was given: drop the flag (or check that this is the snapshot you meant)")
	case m.Encrypted:
		gcm, err := newGCM(key)
		if err != nil {
			return m, nil, err
		}
		if len(rest) < gcm.NonceSize()+gcm.Overhead() {
			return m, nil, errors.New("the snapshot is truncated")
		}
		payload, err = gcm.Open(nil, rest[:gcm.NonceSize()], rest[gcm.NonceSize():], metaLine)
		if err != nil {
			return m, nil, errors.New("the snapshot cannot be decrypted: the key is not the one it was written with, or the file is corrupt")
		}
	default:
		if len(rest) < sha256.Size {
			return m, nil, errors.New("the snapshot is truncated")
		}
		body := b[:len(b)-sha256.Size]
		sum := sha256.Sum256(body)
		if !bytes.Equal(sum[:], b[len(body):]) {
			return m, nil, errors.New("the snapshot is corrupt: its content does not match the SHA-256 at its end")
		}
		payload = rest[:len(rest)-sha256.Size]
	}
	files, err := unpack(payload)
	if err != nil {
		return m, nil, fmt.Errorf("the snapshot's payload is corrupt: %w", err)
	}
	return m, files, nil
}

func newGCM(key []byte) (cipher.AEAD, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("an encryption key must be %d bytes, this one is %d", KeySize, len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// pack is the payload of files: a gzip-compressed tar, in name order so
// that equal files make equal payloads.
func pack(files Files) ([]byte, error) {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, n := range names {
		f := files[n]
		if err := checkName(n); err != nil {
			return nil, err
		}
		if err := tw.WriteHeader(&tar.Header{Name: n, Mode: int64(f.Mode.Perm()), Size: int64(len(f.Data)), Typeflag: tar.TypeReg}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.Data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func unpack(payload []byte) (Files, error) {
	zr, err := gzip.NewReader(bytes.NewReader(payload))
	if err != nil {
		return nil, err
	}
	tr := tar.NewReader(zr)
	files := Files{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files, nil
		}
		if err != nil {
			return nil, err
		}
		if h.Typeflag != tar.TypeReg {
			return nil, fmt.Errorf("%s: only regular files belong in a snapshot", h.Name)
		}
		if err := checkName(h.Name); err != nil {
			return nil, err
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return nil, err
		}
		files[h.Name] = File{Data: data, Mode: os.FileMode(h.Mode).Perm()}
	}
}

// checkName refuses a path that would leave the directory it is restored
// into.
func checkName(n string) error {
	if n == "" || path.IsAbs(n) || path.Clean(n) != n || n == ".." || strings.HasPrefix(n, "../") {
		return fmt.Errorf("%q is not a relative path inside the snapshot", n)
	}
	return nil
}
