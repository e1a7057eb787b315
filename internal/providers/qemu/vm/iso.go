package vm

import (
	"encoding/binary"
	"fmt"
	"sort"
	"strings"
)

// The seed disk cloud-init reads is an ISO 9660 file system with a few small
// files in its root directory. This writer makes exactly that and nothing
// more: one directory, no Rock Ridge or Joliet names. Linux shows plain ISO
// 9660 names in lower case without their ";1" version, so "USER-DATA.;1"
// reads as user-data, which is what cloud-init looks for.

const sectorSize = 2048

// isoFile is a file of the image's root directory.
type isoFile struct {
	name string // as the guest sees it: lower case, no version
	data []byte
}

// buildISO returns an ISO 9660 image labelled volumeID holding files in its
// root directory. Names may use lower-case letters, digits, '-' and '_'.
func buildISO(volumeID string, files []isoFile) ([]byte, error) {
	if len(volumeID) == 0 || len(volumeID) > 32 {
		return nil, fmt.Errorf("iso: volume ID %q must have 1 to 32 characters", volumeID)
	}
	sorted := make([]isoFile, len(files))
	copy(sorted, files)
	for i, f := range sorted {
		id, err := isoName(f.name)
		if err != nil {
			return nil, err
		}
		sorted[i].name = id
	}
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].name < sorted[j].name })
	for i := 1; i < len(sorted); i++ {
		if sorted[i].name == sorted[i-1].name {
			return nil, fmt.Errorf("iso: two files named %q", sorted[i].name)
		}
	}

	// Layout: 16 empty sectors, the primary volume descriptor, the set
	// terminator, the two path tables, the root directory, then the files.
	const (
		pvdSector     = 16
		termSector    = 17
		lPathSector   = 18
		mPathSector   = 19
		rootDirSector = 20
	)
	root := []byte{}
	root = append(root, dirRecord([]byte{0}, rootDirSector, 0, true)...)
	root = append(root, dirRecord([]byte{1}, rootDirSector, 0, true)...)
	next := uint32(rootDirSector + 1)
	locations := make([]uint32, len(sorted))
	for i, f := range sorted {
		locations[i] = next
		next += uint32((len(f.data) + sectorSize - 1) / sectorSize)
	}
	for i, f := range sorted {
		rec := dirRecord([]byte(f.name), locations[i], uint32(len(f.data)), false)
		// A record may not cross a sector boundary.
		if len(root)%sectorSize+len(rec) > sectorSize {
			return nil, fmt.Errorf("iso: too many files for one directory sector")
		}
		root = append(root, rec...)
	}
	rootLen := uint32(sectorSize) // the root directory takes one sector
	// Both "." entries record the directory's own size.
	copy(root[0:], dirRecord([]byte{0}, rootDirSector, rootLen, true))
	copy(root[34:], dirRecord([]byte{1}, rootDirSector, rootLen, true))

	img := make([]byte, int(next)*sectorSize)
	pvd := img[pvdSector*sectorSize : (pvdSector+1)*sectorSize]
	pvd[0] = 1
	copy(pvd[1:6], "CD001")
	pvd[6] = 1
	copy(pvd[8:40], padded("LINUX", 32))
	copy(pvd[40:72], padded(volumeID, 32))
	bothEndian32(pvd[80:88], next)
	bothEndian16(pvd[120:124], 1)
	bothEndian16(pvd[124:128], 1)
	bothEndian16(pvd[128:132], sectorSize)
	const pathTableSize = 10
	bothEndian32(pvd[132:140], pathTableSize)
	binary.LittleEndian.PutUint32(pvd[140:144], lPathSector)
	binary.BigEndian.PutUint32(pvd[148:152], mPathSector)
	copy(pvd[156:190], dirRecord([]byte{0}, rootDirSector, rootLen, true))
	copy(pvd[190:702], padded("", 702-190)) // volume set, publisher, preparer, application
	copy(pvd[702:813], padded("", 813-702)) // copyright, abstract, bibliographic files
	for _, off := range []int{813, 830, 864} {
		copy(pvd[off:off+17], "2000010100000000\x00")
	}
	copy(pvd[847:864], "0000000000000000\x00") // never expires
	pvd[881] = 1

	term := img[termSector*sectorSize:]
	term[0] = 255
	copy(term[1:6], "CD001")
	term[6] = 1

	// One path table entry each: the root directory, its own parent.
	l := img[lPathSector*sectorSize:]
	l[0] = 1
	binary.LittleEndian.PutUint32(l[2:6], rootDirSector)
	binary.LittleEndian.PutUint16(l[6:8], 1)
	m := img[mPathSector*sectorSize:]
	m[0] = 1
	binary.BigEndian.PutUint32(m[2:6], rootDirSector)
	binary.BigEndian.PutUint16(m[6:8], 1)

	copy(img[rootDirSector*sectorSize:], root)
	for i, f := range sorted {
		copy(img[int(locations[i])*sectorSize:], f.data)
	}
	return img, nil
}

// isoName turns a file name into its ISO 9660 identifier: upper case, a
// separator dot when there is no extension, and version 1.
func isoName(name string) (string, error) {
	if name == "" || len(name) > 30 {
		return "", fmt.Errorf("iso: file name %q must have 1 to 30 characters", name)
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return "", fmt.Errorf("iso: file name %q may hold only lower-case letters, digits, '-', '_' and '.'", name)
		}
	}
	id := strings.ToUpper(name)
	if !strings.Contains(id, ".") {
		id += "."
	}
	return id + ";1", nil
}

// dirRecord is a directory record for an extent at sector of size bytes.
func dirRecord(name []byte, sector, size uint32, dir bool) []byte {
	n := 33 + len(name)
	if n%2 == 1 {
		n++
	}
	r := make([]byte, n)
	r[0] = byte(n)
	bothEndian32(r[2:10], sector)
	bothEndian32(r[10:18], size)
	copy(r[18:25], []byte{100, 1, 1, 0, 0, 0, 0}) // 2000-01-01 00:00:00 UTC
	if dir {
		r[25] = 2
	}
	bothEndian16(r[28:32], 1)
	r[32] = byte(len(name))
	copy(r[33:], name)
	return r
}

func bothEndian32(b []byte, v uint32) {
	binary.LittleEndian.PutUint32(b[0:4], v)
	binary.BigEndian.PutUint32(b[4:8], v)
}

func bothEndian16(b []byte, v uint16) {
	binary.LittleEndian.PutUint16(b[0:2], v)
	binary.BigEndian.PutUint16(b[2:4], v)
}

func padded(s string, n int) string {
	if len(s) >= n {
		return s[:n]
	}
	return s + strings.Repeat(" ", n-len(s))
}
