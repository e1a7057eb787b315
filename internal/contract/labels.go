package contract

import (
	"encoding/base64"
	"hash/fnv"

	"k8s.io/apimachinery/pkg/util/validation"
)

// LabelValue is name as a label value: unchanged when it is a valid one,
// otherwise (longer than 63 characters, say) a short hash of it, spelled the
// way Cluster API spells it so that labels written by either agree. The
// MachineSet and MachinePool name labels hold their owner's name this way.
func LabelValue(name string) string {
	if len(validation.IsValidLabelValue(name)) == 0 {
		return name
	}
	h := fnv.New32a()
	h.Write([]byte(name))
	return "hash_" + base64.RawURLEncoding.EncodeToString(h.Sum(nil)) + "_z"
}
