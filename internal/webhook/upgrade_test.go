package webhook

import (
	"strings"
	"testing"

	"capstan.dev/capstan/internal/plan"
)

func TestUpgradeUnderWay(t *testing.T) {
	const previous = "v1.34.2"
	stable := plan.ControlPlaneVersionState{Exists: true, Version: previous, Kind: "KubeadmControlPlane"}
	at := func(name string) plan.WorkerVersionState {
		return plan.WorkerVersionState{Name: name, ObjectName: "c-" + name, Exists: true, Version: previous}
	}
	with := func(w plan.WorkerVersionState, edit func(*plan.WorkerVersionState)) plan.WorkerVersionState {
		edit(&w)
		return w
	}
	cp := func(edit func(*plan.ControlPlaneVersionState)) plan.ControlPlaneVersionState {
		s := stable
		edit(&s)
		return s
	}
	for _, tc := range []struct {
		name string
		st   upgradeState
		want []string // each a part of one wait, in order; none when nothing waits
	}{
		{name: "everything at the previous version", st: upgradeState{ControlPlane: stable, ControlPlaneName: "c-cp",
			MachineDeployments: []plan.WorkerVersionState{at("md-0")}, MachinePools: []plan.WorkerVersionState{at("mp-0")}}},
		{name: "no workers", st: upgradeState{ControlPlane: stable}},
		{name: "no control plane yet", st: upgradeState{}, want: []string{"the control plane does not exist yet"}},
		{name: "control plane asked for an older version",
			st:   upgradeState{ControlPlane: cp(func(s *plan.ControlPlaneVersionState) { s.Version = "v1.33.1" }), ControlPlaneName: "c-cp"},
			want: []string{"the control plane (KubeadmControlPlane c-cp) is at v1.33.1, not yet at v1.34.2"}},
		{name: "control plane provisioning",
			st:   upgradeState{ControlPlane: cp(func(s *plan.ControlPlaneVersionState) { s.Provisioning = true }), ControlPlaneName: "c-cp"},
			want: []string{"the control plane (KubeadmControlPlane c-cp) is still making its first Machines"}},
		{name: "control plane rolling out",
			st:   upgradeState{ControlPlane: cp(func(s *plan.ControlPlaneVersionState) { s.Upgrading = true }), ControlPlaneName: "c-cp"},
			want: []string{"still has Machines that are not at v1.34.2"}},
		{name: "workers behind or rolling out",
			st: upgradeState{ControlPlane: stable, MachineDeployments: []plan.WorkerVersionState{
				at("md-0"),
				with(at("md-1"), func(w *plan.WorkerVersionState) { w.Version = "v1.33.1" }),
				with(at("md-2"), func(w *plan.WorkerVersionState) { w.Upgrading = true }),
			}, MachinePools: []plan.WorkerVersionState{with(at("mp-0"), func(w *plan.WorkerVersionState) { w.Version = "v1.33.1" })}},
			want: []string{"MachineDeployment(s) c-md-1, c-md-2 are not all at v1.34.2 yet", "MachinePool(s) c-mp-0 are not all at v1.34.2 yet"}},
		{name: "everything waits",
			st: upgradeState{ControlPlane: cp(func(s *plan.ControlPlaneVersionState) { s.Upgrading = true }),
				MachineDeployments: []plan.WorkerVersionState{with(at("md-0"), func(w *plan.WorkerVersionState) { w.Upgrading = true })}},
			want: []string{"the control plane", "MachineDeployment(s) c-md-0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := upgradeUnderWay(previous, tc.st)
			if len(got) != len(tc.want) {
				t.Fatalf("waits %q, want %d like %q", got, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("wait %d = %q, want it to say %q", i, got[i], w)
				}
			}
			err := upgradeRefusal("v1.35.0", previous, got)
			switch {
			case len(got) == 0 && err != nil:
				t.Errorf("refused with nothing to wait for: %v", err)
			case len(got) > 0 && (err == nil || !strings.HasPrefix(err.Error(), `spec.topology.version: Invalid value: "v1.35.0": cannot be changed while the upgrade to v1.34.2 is under way`) ||
				!strings.Contains(err.Error(), "unsafe.topology.cluster.x-k8s.io/disable-update-version-check")):
				t.Errorf("refusal %v does not name the field, the upgrade under way and the way out", err)
			}
		})
	}
}
