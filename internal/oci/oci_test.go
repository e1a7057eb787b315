package oci

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	imagespec "github.com/opencontainers/image-spec/specs-go/v1"
)

func archiveBytes(t *testing.T, images ...Image) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := WriteArchive(&b, images...); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// readTar returns the regular files of a tar by name, in order of
// appearance.
func readTar(t *testing.T, data []byte) (map[string][]byte, []*tar.Header) {
	t.Helper()
	files := map[string][]byte{}
	var headers []*tar.Header
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return files, headers
		}
		if err != nil {
			t.Fatal(err)
		}
		headers = append(headers, hdr)
		if hdr.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			files[hdr.Name] = b
		}
	}
}

func blobOf(t *testing.T, files map[string][]byte, d string, into any) []byte {
	t.Helper()
	b, ok := files["blobs/sha256/"+strings.TrimPrefix(d, "sha256:")]
	if !ok {
		t.Fatalf("blob %s is not in the archive", d)
	}
	sum := sha256.Sum256(b)
	if "sha256:"+hex.EncodeToString(sum[:]) != d {
		t.Fatalf("blob %s holds content of another digest", d)
	}
	if into != nil {
		if err := json.Unmarshal(b, into); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

func TestArchiveIsAnImageLayoutContainerdNames(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "kube")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\necho kube\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	shared := []File{{Path: "/usr/local/bin/kube", Source: bin}}
	images := []Image{
		{Name: "registry.k8s.io/kube-apiserver:v1.35.8", Layers: [][]File{shared, {{Path: "/usr/local/bin/kube-apiserver", Link: "kube"}}},
			Config: Config{Entrypoint: []string{"/usr/local/bin/kube-apiserver"}, Env: []string{"PATH=/usr/local/bin:/usr/bin:/bin"}}},
		{Name: "registry.k8s.io/kube-scheduler:v1.35.8", Layers: [][]File{shared, {{Path: "/usr/local/bin/kube-scheduler", Link: "kube"}}}},
		{Name: "localhost:5000/tools/pause:3.10.1", Layers: [][]File{{{Path: "/pause", Data: []byte("pause"), Mode: 0o755}, {Path: "/etc/passwd", Data: []byte("root:x:0:0::/:/pause\n"), Mode: 0o644}}}},
	}
	data := archiveBytes(t, images...)
	files, _ := readTar(t, data)
	var layout imagespec.ImageLayout
	if err := json.Unmarshal(files["oci-layout"], &layout); err != nil || layout.Version != imagespec.ImageLayoutVersion {
		t.Fatalf("oci-layout %q (%v)", files["oci-layout"], err)
	}
	var index imagespec.Index
	if err := json.Unmarshal(files["index.json"], &index); err != nil {
		t.Fatal(err)
	}
	if len(index.Manifests) != len(images) {
		t.Fatalf("index lists %d manifests, want %d", len(index.Manifests), len(images))
	}
	layerWrites := map[string]int{}
	for i, desc := range index.Manifests {
		img := images[i]
		if got := desc.Annotations["io.containerd.image.name"]; got != img.Name {
			t.Errorf("manifest %d is named %q for containerd, want %q", i, got, img.Name)
		}
		if want := img.Name[strings.LastIndex(img.Name, ":")+1:]; desc.Annotations[imagespec.AnnotationRefName] != want {
			t.Errorf("manifest %d has ref name %q, want the tag %q", i, desc.Annotations[imagespec.AnnotationRefName], want)
		}
		var manifest imagespec.Manifest
		if b := blobOf(t, files, desc.Digest.String(), &manifest); int64(len(b)) != desc.Size {
			t.Errorf("manifest %d: size %d, descriptor says %d", i, len(b), desc.Size)
		}
		var config imagespec.Image
		blobOf(t, files, manifest.Config.Digest.String(), &config)
		if config.OS != "linux" || config.Architecture != "amd64" || len(config.RootFS.DiffIDs) != len(img.Layers) {
			t.Errorf("config of %s: %s/%s with %d diff IDs", img.Name, config.OS, config.Architecture, len(config.RootFS.DiffIDs))
		}
		if strings.Join(config.Config.Entrypoint, " ") != strings.Join(img.Config.Entrypoint, " ") {
			t.Errorf("config of %s: entrypoint %q, want %q", img.Name, config.Config.Entrypoint, img.Config.Entrypoint)
		}
		for j, l := range manifest.Layers {
			if l.Digest != config.RootFS.DiffIDs[j] {
				t.Errorf("%s layer %d: digest %s but diff ID %s: an uncompressed layer's are the same", img.Name, j, l.Digest, config.RootFS.DiffIDs[j])
			}
			layerWrites[l.Digest.String()]++
			blobOf(t, files, l.Digest.String(), nil)
		}
	}
	if len(layerWrites) != 4 || layerWrites[index.Manifests[0].Digest.String()] != 0 {
		t.Errorf("want 4 distinct layers (the shared one once), got %v", layerWrites)
	}

	// The pause image's layer: parents first, root-owned, no times.
	var pauseManifest imagespec.Manifest
	blobOf(t, files, index.Manifests[2].Digest.String(), &pauseManifest)
	layer, headers := readTar(t, blobOf(t, files, pauseManifest.Layers[0].Digest.String(), nil))
	var names []string
	for _, h := range headers {
		names = append(names, h.Name)
		if h.Uid != 0 || h.Gid != 0 || h.ModTime.Unix() != 0 || h.Uname != "" {
			t.Errorf("%s: uid %d gid %d uname %q mtime %v: want root and the epoch", h.Name, h.Uid, h.Gid, h.Uname, h.ModTime)
		}
	}
	if got := strings.Join(names, " "); got != "etc/ etc/passwd pause" {
		t.Errorf("pause layer entries %q", got)
	}
	if string(layer["pause"]) != "pause" {
		t.Errorf("pause holds %q", layer["pause"])
	}

	// The same input gives the same bytes: digests are content-keyed.
	if !bytes.Equal(data, archiveBytes(t, images...)) {
		t.Error("two archives of the same images differ")
	}
}

func TestHostFileThatChangesIsRefused(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "bin")
	if err := os.WriteFile(bin, []byte("one"), 0o755); err != nil {
		t.Fatal(err)
	}
	img := Image{Name: "registry.k8s.io/x:v1", Layers: [][]File{{{Path: "/bin/x", Source: bin}}}}
	manifest, blobs, err := imageBlobs(img)
	if err != nil {
		t.Fatal(err)
	}
	_ = manifest
	if err := os.WriteFile(bin, []byte("two"), 0o755); err != nil {
		t.Fatal(err)
	}
	tw := tar.NewWriter(io.Discard)
	if err := writeEntry(tw, "blob", blobs[0].size, blobs[0].write); err == nil {
		t.Error("a layer whose host file changed after it was measured was written without an error")
	}
}

func TestBadInputIsRefused(t *testing.T) {
	ok := []File{{Path: "/x", Data: []byte("x")}}
	for _, tc := range []struct {
		name   string
		images []Image
		want   string
	}{
		{"no image", nil, "no image"},
		{"no tag", []Image{{Name: "registry.k8s.io/pause", Layers: [][]File{ok}}}, "has no tag"},
		{"port is no tag", []Image{{Name: "localhost:5000/pause", Layers: [][]File{ok}}}, "has no tag"},
		{"no registry", []Image{{Name: "pause:3.10", Layers: [][]File{ok}}}, "registry host"},
		{"upper case", []Image{{Name: "registry.k8s.io/Pause:3.10", Layers: [][]File{ok}}}, "lower-case"},
		{"twice", []Image{{Name: "registry.k8s.io/p:1", Layers: [][]File{ok}}, {Name: "registry.k8s.io/p:1", Layers: [][]File{ok}}}, "given twice"},
		{"no layer", []Image{{Name: "registry.k8s.io/p:1"}}, "no layer"},
		{"relative path", []Image{{Name: "registry.k8s.io/p:1", Layers: [][]File{{{Path: "x", Data: []byte("x")}}}}}, "clean absolute path"},
		{"unclean path", []Image{{Name: "registry.k8s.io/p:1", Layers: [][]File{{{Path: "/a/../x", Data: []byte("x")}}}}}, "clean absolute path"},
		{"two kinds", []Image{{Name: "registry.k8s.io/p:1", Layers: [][]File{{{Path: "/x", Data: []byte("x"), Link: "y"}}}}}, "exactly one of"},
		{"path twice", []Image{{Name: "registry.k8s.io/p:1", Layers: [][]File{{{Path: "/x", Data: []byte("x")}, {Path: "/x", Link: "y"}}}}}, "given twice"},
		{"file as parent", []Image{{Name: "registry.k8s.io/p:1", Layers: [][]File{{{Path: "/x", Data: []byte("x")}, {Path: "/x/y", Link: "z"}}}}}, "is below it"},
		{"missing source", []Image{{Name: "registry.k8s.io/p:1", Layers: [][]File{{{Path: "/x", Source: "/nonexistent/capstan-oci"}}}}}, "nonexistent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := WriteArchive(io.Discard, tc.images...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
