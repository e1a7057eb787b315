package vm

import (
	"fmt"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// seedVolumeID is the label cloud-init's NoCloud data source looks for.
const seedVolumeID = "cidata"

// guestNetworkConfig brings up eth0 (the kernel command line turns off
// predictable names) with DHCP from QEMU's user-mode network and, on a
// segment, eth1 with its static address. Routes are the vendor-data's
// business: Debian's cloud-init writes them for ifupdown as net-tools
// commands, which the image does not have.
func guestNetworkConfig(seg *Segment) string {
	c := "version: 2\nethernets:\n  eth0:\n    dhcp4: true\n"
	if seg != nil {
		c += "  eth1:\n    addresses: [\"" + seg.Address + "\"]\n"
	}
	return c
}

// seedISO is the NoCloud seed of spec: meta-data, user-data, vendor-data and
// network-config in an ISO 9660 image labelled cidata.
func seedISO(spec Spec) ([]byte, error) {
	meta, err := metaData(spec)
	if err != nil {
		return nil, err
	}
	return buildISO(seedVolumeID, []isoFile{
		{name: "meta-data", data: meta},
		{name: "user-data", data: spec.UserData},
		{name: "vendor-data", data: spec.VendorData},
		{name: "network-config", data: []byte(guestNetworkConfig(spec.Segment))},
	})
}

// metaData is the NoCloud meta-data: instance-id, local-hostname and the
// keys of spec.MetaData, which may not redefine those two.
func metaData(spec Spec) ([]byte, error) {
	m := map[string]string{"instance-id": spec.InstanceID, "local-hostname": spec.Hostname}
	keys := make([]string, 0, len(spec.MetaData))
	for k := range spec.MetaData {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if _, taken := m[k]; taken {
			return nil, fmt.Errorf("vm: Spec.MetaData[%q] is set by Spec.%s: remove it from MetaData", k, map[string]string{"instance-id": "InstanceID", "local-hostname": "Hostname"}[k])
		}
		if strings.TrimSpace(k) == "" {
			return nil, fmt.Errorf("vm: Spec.MetaData has an empty key: remove it")
		}
		m[k] = spec.MetaData[k]
	}
	return yaml.Marshal(m)
}
