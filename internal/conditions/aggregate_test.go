package conditions

import "testing"

func TestMachineList(t *testing.T) {
	if got := MachineList([]string{"b", "a"}); got != "Machines a, b" {
		t.Error(got)
	}
	if got := MachineList([]string{"e", "d", "c", "b", "a"}); got != "Machines a, b, c and 2 more" {
		t.Error(got)
	}
	if got := MachineList([]string{"a"}); got != "Machine a" {
		t.Error(got)
	}
}
