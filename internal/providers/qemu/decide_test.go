package qemu

import (
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	qemuv1 "capstan.dev/capstan/api/infrastructure/qemu/v1beta2"
)

func TestChoosePorts(t *testing.T) {
	type ports = qemuv1.QEMUMachinePorts
	tests := []struct {
		name         string
		have         ports
		controlPlane bool
		candidates   []int
		taken        map[int]bool
		want         ports
		wantErr      bool
	}{
		{name: "worker gets ssh only", candidates: []int{40001, 40002}, want: ports{SSH: 40001}},
		{name: "control plane gets ssh and api server", controlPlane: true, candidates: []int{40001, 40002}, want: ports{SSH: 40001, APIServer: 40002}},
		{name: "ports on record are kept", have: ports{SSH: 1, APIServer: 2}, controlPlane: true, candidates: []int{40001}, want: ports{SSH: 1, APIServer: 2}},
		{name: "only the missing one is chosen", have: ports{SSH: 40005}, controlPlane: true, candidates: []int{40001}, want: ports{SSH: 40005, APIServer: 40001}},
		{name: "ports others recorded are skipped", controlPlane: true, candidates: []int{40001, 40002, 40003}, taken: map[int]bool{40001: true}, want: ports{SSH: 40002, APIServer: 40003}},
		{name: "a candidate is not given twice", controlPlane: true, candidates: []int{40001, 40001, 40002}, want: ports{SSH: 40001, APIServer: 40002}},
		{name: "a candidate equal to a kept port is skipped", have: ports{SSH: 40001}, controlPlane: true, candidates: []int{40001, 40002}, want: ports{SSH: 40001, APIServer: 40002}},
		{name: "invalid candidates are skipped", candidates: []int{0, -1, 70000, 40001}, want: ports{SSH: 40001}},
		{name: "running out fails and changes nothing", have: ports{SSH: 40005}, controlPlane: true, candidates: []int{40005}, wantErr: true, want: ports{SSH: 40005}},
		{name: "no candidates at all", candidates: nil, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := choosePorts(tc.have, tc.controlPlane, tc.candidates, tc.taken)
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want error %v", err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
			if !tc.wantErr && portsNeeded(got, tc.controlPlane) != 0 {
				t.Errorf("%+v still needs ports", got)
			}
		})
	}
}

func TestLBPortUsable(t *testing.T) {
	for port, want := range map[int]bool{40123: true, 1: true, 6443: false, 22: false, 2379: false, 10250: false, 0: false, 65536: false} {
		if got := lbPortUsable(port); got != want {
			t.Errorf("lbPortUsable(%d) = %v, want %v", port, got, want)
		}
	}
}

func TestVMVerdict(t *testing.T) {
	tests := []struct {
		name        string
		facts       vmFacts
		status      metav1.ConditionStatus
		reason      string
		msgContains []string
	}{
		{name: "not started", facts: vmFacts{}, status: metav1.ConditionFalse, reason: qemuv1.StartingReason},
		{name: "running", facts: vmFacts{Started: true, Running: true, Status: "running"}, status: metav1.ConditionTrue, reason: qemuv1.RunningReason},
		{name: "running, state unknown yet", facts: vmFacts{Started: true, Running: true}, status: metav1.ConditionTrue, reason: qemuv1.RunningReason},
		{name: "QEMU lives but the guest shut down", facts: vmFacts{Started: true, Running: true, Status: "shutdown", ConsoleLog: "/d/console.log"},
			status: metav1.ConditionFalse, reason: qemuv1.VMExitedReason, msgContains: []string{`"shutdown"`, "/d/console.log", "not restarted"}},
		{name: "exited with a reason", facts: vmFacts{Started: true, Exited: "killed by signal 9", ConsoleLog: "/d/console.log"},
			status: metav1.ConditionFalse, reason: qemuv1.VMExitedReason, msgContains: []string{"killed by signal 9", "/d/console.log", "MachineHealthCheck"}},
		{name: "exited, reason unknown", facts: vmFacts{Started: true, ConsoleLog: "/d/console.log"},
			status: metav1.ConditionFalse, reason: qemuv1.VMExitedReason, msgContains: []string{"exited;", "not restarted"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := vmVerdict(tc.facts)
			if v.Status != tc.status || v.Reason != tc.reason {
				t.Errorf("got %s/%s (%s), want %s/%s", v.Status, v.Reason, v.Message, tc.status, tc.reason)
			}
			for _, want := range tc.msgContains {
				if !strings.Contains(v.Message, want) {
					t.Errorf("message %q does not say %q", v.Message, want)
				}
			}
		})
	}
}

func TestDeletionSteps(t *testing.T) {
	tests := []struct {
		name  string
		facts deletionFacts
		want  []deletionStep
	}{
		{name: "without the finalizer there is nothing to do", facts: deletionFacts{Backend: true, VMStarted: true, DirExists: true}},
		{name: "never got anywhere", facts: deletionFacts{HasFinalizer: true}, want: []deletionStep{stepRemoveFinalizer}},
		{name: "directory but no VM yet", facts: deletionFacts{HasFinalizer: true, DirExists: true}, want: []deletionStep{stepRemoveDir, stepRemoveFinalizer}},
		{name: "worker VM", facts: deletionFacts{HasFinalizer: true, VMStarted: true, DirExists: true},
			want: []deletionStep{stepRemoveVM, stepRemoveDir, stepRemoveFinalizer}},
		{name: "control-plane VM: the backend goes first", facts: deletionFacts{HasFinalizer: true, Backend: true, VMStarted: true, DirExists: true},
			want: []deletionStep{stepRemoveBackend, stepRemoveVM, stepRemoveDir, stepRemoveFinalizer}},
		{name: "a backend left behind by a crash", facts: deletionFacts{HasFinalizer: true, Backend: true}, want: []deletionStep{stepRemoveBackend, stepRemoveFinalizer}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := deletionSteps(tc.facts); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
