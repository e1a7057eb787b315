package vm

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
)

// readISO reads back the root directory of an image buildISO wrote, the way
// Linux does for plain ISO 9660 names: lower case, no ".;1".
func readISO(t *testing.T, img []byte) (label string, files map[string][]byte) {
	t.Helper()
	if len(img)%sectorSize != 0 {
		t.Fatalf("image size %d is not a whole number of sectors", len(img))
	}
	pvd := img[16*sectorSize:]
	if pvd[0] != 1 || string(pvd[1:6]) != "CD001" {
		t.Fatalf("sector 16 is not a primary volume descriptor: % x", pvd[:8])
	}
	if got := binary.LittleEndian.Uint32(pvd[80:]); int(got)*sectorSize != len(img) {
		t.Errorf("volume space size %d sectors, image has %d", got, len(img)/sectorSize)
	}
	if got := binary.BigEndian.Uint32(pvd[84:]); int(got)*sectorSize != len(img) {
		t.Errorf("big-endian volume space size %d", got)
	}
	if term := img[17*sectorSize:]; term[0] != 255 || string(term[1:6]) != "CD001" {
		t.Errorf("sector 17 is not the set terminator")
	}
	label = strings.TrimRight(string(pvd[40:72]), " ")
	rootRec := pvd[156:190]
	root := binary.LittleEndian.Uint32(rootRec[2:])
	size := binary.LittleEndian.Uint32(rootRec[10:])
	dir := img[int(root)*sectorSize : int(root)*sectorSize+int(size)]
	files = map[string][]byte{}
	for off := 0; off < len(dir) && dir[off] != 0; off += int(dir[off]) {
		rec := dir[off : off+int(dir[off])]
		if off%sectorSize+len(rec) > sectorSize {
			t.Errorf("record at %d crosses a sector", off)
		}
		name := rec[33 : 33+int(rec[32])]
		if rec[25]&2 != 0 {
			if !bytes.Equal(name, []byte{0}) && !bytes.Equal(name, []byte{1}) {
				t.Errorf("unexpected directory %q", name)
			}
			continue
		}
		n := strings.ToLower(strings.TrimSuffix(strings.TrimSuffix(string(name), ";1"), "."))
		at := int(binary.LittleEndian.Uint32(rec[2:])) * sectorSize
		files[n] = img[at : at+int(binary.LittleEndian.Uint32(rec[10:]))]
	}
	return label, files
}

func TestBuildISO(t *testing.T) {
	big := bytes.Repeat([]byte("x"), 3*sectorSize+5)
	img, err := buildISO("cidata", []isoFile{
		{name: "user-data", data: []byte("#cloud-config\nruncmd: [true]\n")},
		{name: "meta-data", data: []byte("instance-id: a\n")},
		{name: "network-config", data: big},
		{name: "vendor-data", data: nil},
	})
	if err != nil {
		t.Fatal(err)
	}
	label, files := readISO(t, img)
	if label != "cidata" {
		t.Errorf("volume ID %q, want cidata", label)
	}
	want := map[string]string{
		"user-data":      "#cloud-config\nruncmd: [true]\n",
		"meta-data":      "instance-id: a\n",
		"network-config": string(big),
		"vendor-data":    "",
	}
	if len(files) != len(want) {
		t.Errorf("files %v, want %d", len(files), len(want))
	}
	for name, content := range want {
		got, ok := files[name]
		if !ok {
			t.Errorf("no %s in the image", name)
			continue
		}
		if string(got) != content {
			t.Errorf("%s holds %d bytes, want %d", name, len(got), len(content))
		}
	}
}

func TestBuildISORefuses(t *testing.T) {
	for name, c := range map[string]struct {
		label string
		files []isoFile
		want  string
	}{
		"upper case name": {"cidata", []isoFile{{name: "User-Data"}}, "lower-case"},
		"slash":           {"cidata", []isoFile{{name: "a/b"}}, "lower-case"},
		"empty name":      {"cidata", []isoFile{{name: ""}}, "1 to 30"},
		"duplicate":       {"cidata", []isoFile{{name: "a"}, {name: "a"}}, "two files"},
		"long label":      {strings.Repeat("x", 33), nil, "1 to 32"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := buildISO(c.label, c.files)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one saying %q", err, c.want)
			}
		})
	}
}

func TestSeedISO(t *testing.T) {
	img, err := seedISO(Spec{
		Hostname: "cp-0", InstanceID: "i-123",
		MetaData:   map[string]string{"provider-id": "qemu:///default/cp-0"},
		UserData:   []byte("#cloud-config\n"),
		VendorData: []byte("#cloud-config\nbootcmd: [true]\n"),
	})
	if err != nil {
		t.Fatal(err)
	}
	_, files := readISO(t, img)
	if got, want := string(files["meta-data"]), "instance-id: i-123\nlocal-hostname: cp-0\nprovider-id: qemu:///default/cp-0\n"; got != want {
		t.Errorf("meta-data:\n%s\nwant:\n%s", got, want)
	}
	if string(files["user-data"]) != "#cloud-config\n" || !strings.Contains(string(files["vendor-data"]), "bootcmd") {
		t.Errorf("user-data %q, vendor-data %q", files["user-data"], files["vendor-data"])
	}
	if nc := string(files["network-config"]); !strings.Contains(nc, "dhcp4: true") || strings.Contains(nc, "eth1") {
		t.Errorf("network-config off a segment %q", nc)
	}
	img, err = seedISO(Spec{Hostname: "cp-0", InstanceID: "i-123", Segment: &Segment{Address: "172.31.0.2/24"}})
	if err != nil {
		t.Fatal(err)
	}
	_, files = readISO(t, img)
	if got, want := string(files["network-config"]), "version: 2\nethernets:\n  eth0:\n    dhcp4: true\n  eth1:\n    addresses: [\"172.31.0.2/24\"]\n"; got != want {
		t.Errorf("network-config on a segment:\n%s\nwant:\n%s", got, want)
	}
	if _, err := seedISO(Spec{Hostname: "a", InstanceID: "b", MetaData: map[string]string{"instance-id": "c"}}); err == nil || !strings.Contains(err.Error(), "Spec.InstanceID") {
		t.Errorf("meta-data redefining instance-id: error %v, want one naming Spec.InstanceID", err)
	}
}
