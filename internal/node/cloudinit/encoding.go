package cloudinit

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"fmt"
	"io"
	"strings"
)

// maxDecodedSize bounds what a gzip entry may expand to, so a hostile or
// corrupt document cannot exhaust the machine's memory.
const maxDecodedSize = 64 << 20

// canonicalEncoding folds cloud-init's encoding aliases (case-insensitive)
// onto one Encoding each.
func canonicalEncoding(s string) (Encoding, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "plain", "text/plain":
		return EncodingPlain, nil
	case "b64", "base64":
		return EncodingBase64, nil
	case "gz", "gzip":
		return EncodingGzip, nil
	case "gz+b64", "gz+base64", "gzip+b64", "gzip+base64":
		return EncodingGzipBase64, nil
	}
	return "", fmt.Errorf("%q is not a supported encoding (want one of plain, b64, base64, gzip, gz, gz+b64, gzip+base64)", s)
}

// decodeContent turns a write_files content into the bytes to write.
func decodeContent(content string, enc Encoding) ([]byte, error) {
	switch enc {
	case EncodingPlain:
		return []byte(content), nil
	case EncodingBase64:
		return decodeBase64(content)
	case EncodingGzip:
		return gunzip([]byte(content))
	case EncodingGzipBase64:
		raw, err := decodeBase64(content)
		if err != nil {
			return nil, err
		}
		return gunzip(raw)
	}
	return nil, fmt.Errorf("unknown encoding %q", enc)
}

// decodeBase64 decodes standard base64, ignoring the line breaks and spaces a
// YAML block scalar leaves in it, with or without padding.
func decodeBase64(s string) ([]byte, error) {
	clean := strings.Map(func(r rune) rune {
		switch r {
		case ' ', '\t', '\n', '\r':
			return -1
		}
		return r
	}, s)
	b, err := base64.StdEncoding.DecodeString(clean)
	if err != nil {
		var err2 error
		if b, err2 = base64.RawStdEncoding.DecodeString(strings.TrimRight(clean, "=")); err2 != nil {
			return nil, fmt.Errorf("content is not valid base64: %v", err)
		}
	}
	return b, nil
}

func gunzip(b []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("content is not valid gzip: %v", err)
	}
	defer zr.Close()
	out, err := io.ReadAll(io.LimitReader(zr, maxDecodedSize+1))
	if err != nil {
		return nil, fmt.Errorf("content is not valid gzip: %v", err)
	}
	if len(out) > maxDecodedSize {
		return nil, fmt.Errorf("content expands beyond %d MiB", maxDecodedSize>>20)
	}
	return out, nil
}
