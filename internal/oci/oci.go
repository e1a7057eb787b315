package oci

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	digest "github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	imagespec "github.com/opencontainers/image-spec/specs-go/v1"
)

// File is one entry of a layer: a regular file (Data, or the host file
// Source, read when the archive is written), a symbolic link (Link), or a
// directory (Dir). Path is absolute inside the image; parents that no entry
// names are created 0755.
type File struct {
	Path   string
	Mode   fs.FileMode
	Data   []byte
	Source string
	Link   string
	Dir    bool
}

// Config is what a container of the image runs, where no Pod says
// otherwise.
type Config struct {
	Entrypoint []string
	Cmd        []string
	Env        []string
	User       string
	WorkingDir string
}

// Image is one image to write: Name is the reference containerd records it
// under (registry.k8s.io/pause:3.10.1), the one Pods and kubeadm name.
type Image struct {
	Name   string
	Layers [][]File
	Config Config
}

// epoch is the time every tar header and the image's creation time carry:
// a fixed one keeps digests independent of when the image was built.
var epoch = time.Unix(0, 0).UTC()

// blob is a content-addressed piece of the archive.
type blob struct {
	digest digest.Digest
	size   int64
	write  func(io.Writer) error
}

// WriteArchive writes images as one OCI image-layout tar to w. A layer
// shared by several images (the same files) is written once.
func WriteArchive(w io.Writer, images ...Image) error {
	if len(images) == 0 {
		return errors.New("oci: no image to write")
	}
	var blobs []blob
	seen := map[digest.Digest]bool{}
	add := func(b blob) {
		if !seen[b.digest] {
			seen[b.digest] = true
			blobs = append(blobs, b)
		}
	}
	index := imagespec.Index{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: imagespec.MediaTypeImageIndex}
	names := map[string]bool{}
	for i, img := range images {
		if err := checkName(img.Name); err != nil {
			return fmt.Errorf("oci: images[%d].Name: %w", i, err)
		}
		if names[img.Name] {
			return fmt.Errorf("oci: images[%d].Name %q is given twice: each name may be written once", i, img.Name)
		}
		names[img.Name] = true
		manifest, layerBlobs, err := imageBlobs(img)
		if err != nil {
			return fmt.Errorf("oci: image %s: %w", img.Name, err)
		}
		for _, b := range layerBlobs {
			add(b)
		}
		add(manifest)
		index.Manifests = append(index.Manifests, imagespec.Descriptor{
			MediaType: imagespec.MediaTypeImageManifest,
			Digest:    manifest.digest,
			Size:      manifest.size,
			Platform:  &imagespec.Platform{Architecture: "amd64", OS: "linux"},
			Annotations: map[string]string{
				// containerd's import names the image by this annotation;
				// the OCI one keeps the tag for other tools.
				"io.containerd.image.name":  img.Name,
				imagespec.AnnotationRefName: tagOf(img.Name),
			},
		})
	}
	indexJSON, err := json.Marshal(index)
	if err != nil {
		return err
	}
	layoutJSON, err := json.Marshal(imagespec.ImageLayout{Version: imagespec.ImageLayoutVersion})
	if err != nil {
		return err
	}
	tw := tar.NewWriter(w)
	for _, dir := range []string{"blobs/", "blobs/sha256/"} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir, Mode: 0o755, ModTime: epoch, Format: tar.FormatPAX}); err != nil {
			return err
		}
	}
	for _, f := range []struct {
		name string
		data []byte
	}{{imagespec.ImageLayoutFile, layoutJSON}, {"index.json", indexJSON}} {
		if err := writeEntry(tw, f.name, int64(len(f.data)), func(w io.Writer) error { _, err := w.Write(f.data); return err }); err != nil {
			return err
		}
	}
	for _, b := range blobs {
		if err := writeEntry(tw, "blobs/sha256/"+b.digest.Encoded(), b.size, b.write); err != nil {
			return fmt.Errorf("oci: writing blob %s: %w", b.digest, err)
		}
	}
	return tw.Close()
}

// writeEntry writes one regular file of the archive, checking that write
// gives exactly size bytes (a host file that changed meanwhile would not).
func writeEntry(tw *tar.Writer, name string, size int64, write func(io.Writer) error) error {
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Size: size, Mode: 0o644, ModTime: epoch, Format: tar.FormatPAX}); err != nil {
		return err
	}
	return write(tw)
}

// imageBlobs makes the blobs of one image: its layers, its config and its
// manifest, which comes first in the result.
func imageBlobs(img Image) (blob, []blob, error) {
	var blobs []blob
	config := imagespec.Image{
		Created:  &epoch,
		Platform: imagespec.Platform{Architecture: "amd64", OS: "linux"},
		Config: imagespec.ImageConfig{
			Entrypoint: img.Config.Entrypoint, Cmd: img.Config.Cmd, Env: img.Config.Env,
			User: img.Config.User, WorkingDir: img.Config.WorkingDir,
		},
		RootFS: imagespec.RootFS{Type: "layers"},
	}
	manifest := imagespec.Manifest{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: imagespec.MediaTypeImageManifest}
	if len(img.Layers) == 0 {
		return blob{}, nil, errors.New("it has no layer")
	}
	for i, files := range img.Layers {
		layer, err := layerBlob(files)
		if err != nil {
			return blob{}, nil, fmt.Errorf("layer %d: %w", i, err)
		}
		blobs = append(blobs, layer)
		// Uncompressed: the layer's digest is its diff ID.
		config.RootFS.DiffIDs = append(config.RootFS.DiffIDs, layer.digest)
		manifest.Layers = append(manifest.Layers, imagespec.Descriptor{MediaType: imagespec.MediaTypeImageLayer, Digest: layer.digest, Size: layer.size})
	}
	configBlob, err := jsonBlob(config)
	if err != nil {
		return blob{}, nil, err
	}
	blobs = append(blobs, configBlob)
	manifest.Config = imagespec.Descriptor{MediaType: imagespec.MediaTypeImageConfig, Digest: configBlob.digest, Size: configBlob.size}
	manifestBlob, err := jsonBlob(manifest)
	if err != nil {
		return blob{}, nil, err
	}
	return manifestBlob, blobs, nil
}

func jsonBlob(v any) (blob, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return blob{}, err
	}
	return blob{digest: digest.FromBytes(data), size: int64(len(data)), write: func(w io.Writer) error { _, err := w.Write(data); return err }}, nil
}

// layerBlob measures a layer by writing it once to a hash; the archive
// writes it again from the same files, checking that it comes out the same
// (a host file that changed in between would make a blob that does not
// match its digest, which containerd refuses to import).
func layerBlob(files []File) (blob, error) {
	entries, err := layerEntries(files)
	if err != nil {
		return blob{}, err
	}
	measure := func(w io.Writer) (string, int64, error) {
		h := sha256.New()
		n := &countingWriter{w: io.MultiWriter(w, h)}
		err := writeLayer(n, entries)
		return hex.EncodeToString(h.Sum(nil)), n.n, err
	}
	sum, size, err := measure(io.Discard)
	if err != nil {
		return blob{}, err
	}
	write := func(w io.Writer) error {
		again, n, err := measure(w)
		if err == nil && (again != sum || n != size) {
			err = errors.New("its files changed while the archive was written: write it again")
		}
		return err
	}
	return blob{digest: digest.NewDigestFromEncoded(digest.SHA256, sum), size: size, write: write}, nil
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// layerEntries checks files and orders them with their missing parent
// directories, parents first, in path order.
func layerEntries(files []File) ([]File, error) {
	byPath := map[string]File{}
	for i, f := range files {
		if !path.IsAbs(f.Path) || path.Clean(f.Path) != f.Path || f.Path == "/" {
			return nil, fmt.Errorf("files[%d].Path %q must be a clean absolute path below /", i, f.Path)
		}
		kinds := 0
		for _, set := range []bool{f.Data != nil || (f.Source == "" && f.Link == "" && !f.Dir), f.Source != "", f.Link != "", f.Dir} {
			if set {
				kinds++
			}
		}
		if kinds != 1 {
			return nil, fmt.Errorf("files[%d] (%s) must be exactly one of Data, Source, Link or Dir", i, f.Path)
		}
		if prev, dup := byPath[f.Path]; dup && !(prev.Dir && f.Dir) {
			return nil, fmt.Errorf("files[%d].Path %s is given twice", i, f.Path)
		}
		byPath[f.Path] = f
	}
	for p := range byPath {
		for dir := path.Dir(p); dir != "/"; dir = path.Dir(dir) {
			if f, ok := byPath[dir]; ok && !f.Dir {
				return nil, fmt.Errorf("%s is a file of the layer but %s is below it", dir, p)
			}
			if _, ok := byPath[dir]; !ok {
				byPath[dir] = File{Path: dir, Dir: true, Mode: 0o755}
			}
		}
	}
	out := make([]File, 0, len(byPath))
	for _, f := range byPath {
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b File) int { return strings.Compare(a.Path, b.Path) })
	return out, nil
}

// writeLayer writes the layer's tar: names relative to the root, owner
// root, no times.
func writeLayer(w io.Writer, entries []File) error {
	tw := tar.NewWriter(w)
	for _, f := range entries {
		hdr := &tar.Header{Name: strings.TrimPrefix(f.Path, "/"), Mode: int64(f.Mode.Perm()), ModTime: epoch, Format: tar.FormatPAX}
		switch {
		case f.Dir:
			hdr.Typeflag, hdr.Name = tar.TypeDir, hdr.Name+"/"
			if hdr.Mode == 0 {
				hdr.Mode = 0o755
			}
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
		case f.Link != "":
			hdr.Typeflag, hdr.Linkname, hdr.Mode = tar.TypeSymlink, f.Link, 0o777
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
		case f.Source != "":
			if err := writeHostFile(tw, hdr, f.Source); err != nil {
				return err
			}
		default:
			hdr.Typeflag, hdr.Size = tar.TypeReg, int64(len(f.Data))
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
			if _, err := tw.Write(f.Data); err != nil {
				return err
			}
		}
	}
	return tw.Close()
}

func writeHostFile(tw *tar.Writer, hdr *tar.Header, source string) error {
	in, err := os.Open(source)
	if err != nil {
		return err
	}
	defer in.Close()
	info, err := in.Stat()
	if err != nil {
		return err
	}
	if !info.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", source)
	}
	hdr.Typeflag, hdr.Size = tar.TypeReg, info.Size()
	if hdr.Mode == 0 {
		hdr.Mode = int64(info.Mode().Perm())
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	if _, err := io.Copy(tw, in); err != nil {
		return fmt.Errorf("reading %s: %w", source, err)
	}
	return nil
}

// checkName accepts what containerd can record and a Pod can name: a
// repository with a registry host, and a tag.
func checkName(name string) error {
	repo, tag := splitTag(name)
	switch {
	case name == "":
		return errors.New("is empty: give the image's full reference, such as registry.k8s.io/pause:3.10.1")
	case tag == "":
		return fmt.Errorf("%q has no tag: add one, such as %s:v1", name, name)
	case !strings.Contains(repo, "/") || !strings.ContainsAny(strings.SplitN(repo, "/", 2)[0], ".:"):
		return fmt.Errorf("%q does not start with a registry host: write it in full, such as registry.k8s.io/%s", name, name)
	case strings.ToLower(repo) != repo || strings.ContainsAny(name, " \t\n@"):
		return fmt.Errorf("%q is not a valid reference: use lower-case repository names and no digest", name)
	}
	return nil
}

// splitTag splits a reference at its tag's colon: the last one after the
// last slash, so that a registry's port is not taken for a tag.
func splitTag(name string) (repo, tag string) {
	colon := strings.LastIndex(name, ":")
	if colon <= strings.LastIndex(name, "/") {
		return name, ""
	}
	return name[:colon], name[colon+1:]
}

func tagOf(name string) string {
	_, tag := splitTag(name)
	return tag
}
