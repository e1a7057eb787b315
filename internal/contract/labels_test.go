package contract

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestLabelValue(t *testing.T) {
	if got := LabelValue("ms-1"); got != "ms-1" {
		t.Errorf("a valid value changed: %q", got)
	}
	long := strings.Repeat("machineSetName", 12)
	got := LabelValue(long)
	if problems := validation.IsValidLabelValue(got); len(problems) > 0 {
		t.Errorf("%q is not a label value: %v", got, problems)
	}
	// The spelling Cluster API uses for the same name.
	if got != "hash_FR_ghQ_z" {
		t.Errorf("LabelValue(long) = %q", got)
	}
	if LabelValue(long+"x") == got {
		t.Error("different names hash alike")
	}
}
