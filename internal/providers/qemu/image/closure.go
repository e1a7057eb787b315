package image

import (
	"debug/elf"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"capstan.dev/capstan/internal/oci"
)

// libraryDirs are where the guest's dynamic loader finds shared libraries
// (Debian, merged /usr, amd64).
var libraryDirs = []string{"/usr/lib/x86_64-linux-gnu", "/usr/lib"}

// closure returns the files of the root file system root that the given
// paths (absolute, as the guest sees them) need to run in a container of
// their own: each path, every symbolic link on the way to its file, and
// the shared libraries its ELF files load (DT_NEEDED and their
// interpreter), transitively. A path naming a directory brings its whole
// tree (plugin directories loaded with dlopen).
func closure(root string, paths ...string) ([]oci.File, error) {
	c := &closureWalk{root: root, seen: map[string]bool{}}
	for _, p := range paths {
		if err := c.add(p); err != nil {
			return nil, err
		}
	}
	slices.SortFunc(c.files, func(a, b oci.File) int { return strings.Compare(a.Path, b.Path) })
	return c.files, nil
}

type closureWalk struct {
	root  string
	seen  map[string]bool
	files []oci.File
}

// add takes the guest path p into the closure.
func (c *closureWalk) add(p string) error {
	p = path.Clean(p)
	if c.seen[p] {
		return nil
	}
	c.seen[p] = true
	// A symbolic link in a parent directory (/lib → usr/lib) comes first.
	if dir := path.Dir(p); dir != "/" {
		real, err := c.resolveParents(dir)
		if err != nil {
			return err
		}
		if real != dir {
			return c.add(path.Join(real, path.Base(p)))
		}
	}
	host := filepath.Join(c.root, p)
	info, err := os.Lstat(host)
	if err != nil {
		return fmt.Errorf("image: %s in the guest's root file system: %w", p, err)
	}
	switch {
	case info.Mode()&os.ModeSymlink != 0:
		target, err := os.Readlink(host)
		if err != nil {
			return err
		}
		c.files = append(c.files, oci.File{Path: p, Link: target})
		if !path.IsAbs(target) {
			target = path.Join(path.Dir(p), target)
		}
		return c.add(target)
	case info.IsDir():
		entries, err := os.ReadDir(host)
		if err != nil {
			return err
		}
		c.files = append(c.files, oci.File{Path: p, Dir: true, Mode: info.Mode().Perm()})
		for _, e := range entries {
			if err := c.add(path.Join(p, e.Name())); err != nil {
				return err
			}
		}
		return nil
	case info.Mode().IsRegular():
		c.files = append(c.files, oci.File{Path: p, Mode: info.Mode().Perm(), Source: host})
		return c.addNeeded(p, host)
	default:
		return fmt.Errorf("image: %s in the guest's root file system is neither a file, a directory nor a symbolic link", p)
	}
}

// resolveParents follows the symbolic links among dir's components and
// returns the real directory, adding each link on the way.
func (c *closureWalk) resolveParents(dir string) (string, error) {
	parent := path.Dir(dir)
	if parent != "/" {
		real, err := c.resolveParents(parent)
		if err != nil {
			return "", err
		}
		dir = path.Join(real, path.Base(dir))
	}
	info, err := os.Lstat(filepath.Join(c.root, dir))
	if err != nil || info.Mode()&os.ModeSymlink == 0 {
		return dir, nil
	}
	target, err := os.Readlink(filepath.Join(c.root, dir))
	if err != nil {
		return "", err
	}
	// The link alone: its target directory is walked only for what lies
	// below it on the way to a file.
	if !c.seen[dir] {
		c.seen[dir] = true
		c.files = append(c.files, oci.File{Path: dir, Link: target})
	}
	if !path.IsAbs(target) {
		target = path.Join(path.Dir(dir), target)
	}
	return c.resolveParents(target)
}

// addNeeded adds what the ELF file at host (guest path p) loads; a file
// that is not ELF (a script, data) needs nothing.
func (c *closureWalk) addNeeded(p, host string) error {
	f, err := elf.Open(host)
	if err != nil {
		return nil
	}
	defer f.Close()
	for _, prog := range f.Progs {
		if prog.Type != elf.PT_INTERP {
			continue
		}
		b := make([]byte, prog.Filesz)
		if _, err := prog.ReadAt(b, 0); err != nil {
			return fmt.Errorf("image: %s: reading its interpreter: %w", p, err)
		}
		if err := c.add(strings.TrimRight(string(b), "\x00")); err != nil {
			return err
		}
	}
	needed, err := f.ImportedLibraries()
	if err != nil {
		return fmt.Errorf("image: %s: %w", p, err)
	}
	dirs := slices.Clone(libraryDirs)
	for _, tag := range []elf.DynTag{elf.DT_RUNPATH, elf.DT_RPATH} {
		paths, _ := f.DynString(tag)
		for _, list := range paths {
			for _, dir := range strings.Split(list, ":") {
				dirs = append(dirs, strings.ReplaceAll(dir, "$ORIGIN", path.Dir(p)))
			}
		}
	}
	for _, lib := range needed {
		found := ""
		for _, dir := range dirs {
			if _, err := os.Stat(filepath.Join(c.root, dir, lib)); err == nil {
				found = path.Join(dir, lib)
				break
			}
		}
		if found == "" {
			return fmt.Errorf("image: %s needs %s, which is in none of %v of the guest's root file system", p, lib, dirs)
		}
		if err := c.add(found); err != nil {
			return err
		}
	}
	return nil
}
