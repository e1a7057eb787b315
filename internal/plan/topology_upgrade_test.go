package plan_test

import (
	"reflect"
	"strings"
	"testing"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/plan"
)

// Builders for the upgrade decision's input: a control plane and workers
// in the states a topology passes through.

func kcp(version string) plan.ControlPlaneVersionState {
	return plan.ControlPlaneVersionState{Exists: true, Version: version, Kind: "KubeadmControlPlane"}
}

func kcpUpgrading(version string) plan.ControlPlaneVersionState {
	cp := kcp(version)
	cp.Upgrading = true
	return cp
}

func worker(name, version string) plan.WorkerVersionState {
	return plan.WorkerVersionState{Name: name, Exists: true, Version: version}
}

func newWorker(name string) plan.WorkerVersionState {
	return plan.WorkerVersionState{Name: name}
}

func workerRolling(w plan.WorkerVersionState) plan.WorkerVersionState {
	w.Upgrading = true
	return w
}

func held(w plan.WorkerVersionState) plan.WorkerVersionState {
	w.Hold = true
	return w
}

func deferred(w plan.WorkerVersionState) plan.WorkerVersionState {
	w.Defer = true
	return w
}

func versions(kv ...string) map[string]string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// want is what a case checks; a nil map or slice is checked as empty, the
// message by the fragments it must contain.
type want struct {
	cp                 string
	mds, mps           map[string]string
	mdsPending         []string
	mpsPending         []string
	cpPlan, workerPlan []string
	step               string
	reason             string
	message            []string
	err                string
}

func checkDecision(t *testing.T, got plan.TopologyUpgrade, w want) {
	t.Helper()
	if got.ControlPlaneVersion != w.cp {
		t.Errorf("control plane version %q, want %q", got.ControlPlaneVersion, w.cp)
	}
	eqMap := func(what string, got, want map[string]string) {
		if want == nil {
			want = map[string]string{}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s %v, want %v", what, got, want)
		}
	}
	eqList := func(what string, got, want []string) {
		if len(got) != 0 || len(want) != 0 {
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s %q, want %q", what, got, want)
			}
		}
	}
	eqMap("MachineDeployments", got.MachineDeployments, w.mds)
	eqMap("MachinePools", got.MachinePools, w.mps)
	eqList("MachineDeployments pending creation", got.MachineDeploymentsCreatePending, w.mdsPending)
	eqList("MachinePools pending creation", got.MachinePoolsCreatePending, w.mpsPending)
	eqList("control plane plan", got.ControlPlaneUpgradePlan, w.cpPlan)
	eqList("workers plan", got.WorkersUpgradePlan, w.workerPlan)
	if got.UpgradeStep != w.step {
		t.Errorf("upgrade step %q, want %q", got.UpgradeStep, w.step)
	}
	if got.Reason != w.reason {
		t.Errorf("reason %q, want %q", got.Reason, w.reason)
	}
	if w.reason == "" && got.Message != "" {
		t.Errorf("message %q, want none", got.Message)
	}
	for _, frag := range w.message {
		if !strings.Contains(got.Message, frag) {
			t.Errorf("message %q does not say %q", got.Message, frag)
		}
	}
	switch {
	case w.err == "" && got.Err != nil:
		t.Errorf("unexpected error %v", got.Err)
	case w.err != "" && got.Err == nil:
		t.Errorf("no error, want one saying %q", w.err)
	case w.err != "" && !strings.Contains(got.Err.Error(), w.err):
		t.Errorf("error %q does not say %q", got.Err, w.err)
	case got.Err != nil && got.Message != got.Err.Error():
		t.Errorf("message %q, want the error's text", got.Message)
	}
}

// ws lists workers in the topology's order.
func ws(workers ...plan.WorkerVersionState) []plan.WorkerVersionState { return workers }

// decisionCase is one row of the decision's tables.
type decisionCase struct {
	name string
	in   plan.TopologyUpgradeInput
	want want
}

func runDecisions(t *testing.T, cases []decisionCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { checkDecision(t, plan.PlanTopologyUpgrade(tc.in), tc.want) })
	}
}

const upgrading = clusterv1.ClusterTopologyReconciledClusterUpgradingReason

func TestPlanTopologyUpgradeCreate(t *testing.T) {
	runDecisions(t, []decisionCase{
		{
			name: "a new topology: the control plane and every worker are created at the version",
			in: plan.TopologyUpgradeInput{
				Version:            "v1.31.0",
				MachineDeployments: []plan.WorkerVersionState{newWorker("md-0"), newWorker("md-1")},
				MachinePools:       []plan.WorkerVersionState{newWorker("mp-0")},
			},
			want: want{cp: "v1.31.0", mds: versions("md-0", "v1.31.0", "md-1", "v1.31.0"), mps: versions("mp-0", "v1.31.0")},
		},
		{
			name: "a new topology with a chain of versions in the class is still created at the version",
			in: plan.TopologyUpgradeInput{
				Version:            "v1.31.0",
				KubernetesVersions: []string{"v1.29.0", "v1.30.0", "v1.31.0"},
				MachineDeployments: []plan.WorkerVersionState{newWorker("md-0")},
			},
			want: want{cp: "v1.31.0", mds: versions("md-0", "v1.31.0")},
		},
		{
			name: "a worker added to a stable control plane is created at once, at the control plane's version",
			in: plan.TopologyUpgradeInput{
				Version:            "v1.31.0",
				ControlPlane:       kcp("v1.31.0"),
				MachineDeployments: []plan.WorkerVersionState{worker("md-0", "v1.31.0"), newWorker("md-1")},
				MachinePools:       []plan.WorkerVersionState{newWorker("mp-0")},
			},
			want: want{cp: "v1.31.0", mds: versions("md-0", "v1.31.0", "md-1", "v1.31.0"), mps: versions("mp-0", "v1.31.0")},
		},
		{
			name: "a worker added while the control plane still provisions waits",
			in: plan.TopologyUpgradeInput{
				Version:            "v1.31.0",
				ControlPlane:       plan.ControlPlaneVersionState{Exists: true, Version: "v1.31.0", Provisioning: true, Kind: "KubeadmControlPlane"},
				MachineDeployments: []plan.WorkerVersionState{worker("md-0", "v1.31.0"), newWorker("md-1")},
			},
			want: want{
				cp: "v1.31.0", mds: versions("md-0", "v1.31.0"), mdsPending: []string{"md-1"},
				reason:  upgrading,
				message: []string{"MachineDeployment md-1 to be created once the KubeadmControlPlane upgrade is complete"},
			},
		},
		{
			name: "a worker added during a control plane upgrade waits; so does a new MachinePool",
			in: plan.TopologyUpgradeInput{
				Version:            "v1.31.0",
				ControlPlane:       kcpUpgrading("v1.31.0"),
				MachineDeployments: []plan.WorkerVersionState{worker("md-0", "v1.30.2"), newWorker("md-1")},
				MachinePools:       []plan.WorkerVersionState{newWorker("mp-0")},
			},
			want: want{
				cp: "v1.31.0", mds: versions("md-0", "v1.30.2"), mdsPending: []string{"md-1"}, mpsPending: []string{"mp-0"},
				workerPlan: []string{"v1.31.0"}, step: "v1.31.0",
				reason: upgrading,
				message: []string{
					"Cluster is upgrading to v1.31.0",
					"KubeadmControlPlane upgrading to version v1.31.0",
					"MachineDeployment md-0 pending upgrade to version v1.31.0, waiting for the KubeadmControlPlane upgrade to complete",
					"MachineDeployment md-1 to be created once",
					"MachinePool mp-0 to be created once",
				},
			},
		},
		{
			name: "a worker added while the control plane is about to upgrade waits",
			in: plan.TopologyUpgradeInput{
				Version:            "v1.31.0",
				ControlPlane:       kcp("v1.30.2"),
				MachineDeployments: []plan.WorkerVersionState{newWorker("md-0")},
			},
			want: want{
				cp: "v1.31.0", mdsPending: []string{"md-0"}, step: "v1.31.0",
				reason: upgrading,
			},
		},
	})
}

func TestPlanTopologyUpgradeOrder(t *testing.T) {
	runDecisions(t, []decisionCase{
		{
			name: "nothing to do: everything at the version",
			in: plan.TopologyUpgradeInput{
				Version: "v1.31.0", ControlPlane: kcp("v1.31.0"),
				MachineDeployments: ws(worker("md-0", "v1.31.0")),
				MachinePools:       ws(worker("mp-0", "v1.31.0")),
			},
			want: want{cp: "v1.31.0", mds: versions("md-0", "v1.31.0"), mps: versions("mp-0", "v1.31.0")},
		},
		{
			name: "a new version: the control plane goes first, the workers keep theirs",
			in: plan.TopologyUpgradeInput{
				Version: "v1.31.0", ControlPlane: kcp("v1.30.2"),
				MachineDeployments: ws(worker("md-0", "v1.30.2"), worker("md-1", "v1.30.2")),
			},
			want: want{
				cp: "v1.31.0", mds: versions("md-0", "v1.30.2", "md-1", "v1.30.2"),
				workerPlan: []string{"v1.31.0"}, step: "v1.31.0",
				reason: upgrading,
				message: []string{
					"KubeadmControlPlane upgrading to version v1.31.0",
					"MachineDeployments md-0, md-1 pending upgrade to version v1.31.0, waiting for the KubeadmControlPlane upgrade to complete",
				},
			},
		},
		{
			name: "a patch upgrade goes the same way",
			in: plan.TopologyUpgradeInput{
				Version: "v1.30.5", ControlPlane: kcp("v1.30.2"),
				MachineDeployments: ws(worker("md-0", "v1.30.2")),
			},
			want: want{
				cp: "v1.30.5", mds: versions("md-0", "v1.30.2"),
				workerPlan: []string{"v1.30.5"}, step: "v1.30.5", reason: upgrading,
			},
		},
		{
			name: "the control plane still rolling: the workers wait",
			in: plan.TopologyUpgradeInput{
				Version: "v1.31.0", ControlPlane: kcpUpgrading("v1.31.0"),
				MachineDeployments: ws(worker("md-0", "v1.30.2")),
			},
			want: want{
				cp: "v1.31.0", mds: versions("md-0", "v1.30.2"), workerPlan: []string{"v1.31.0"}, step: "v1.31.0",
				reason:  upgrading,
				message: []string{"KubeadmControlPlane upgrading to version v1.31.0", "md-0 pending upgrade to version v1.31.0, waiting for the KubeadmControlPlane upgrade to complete"},
			},
		},
		{
			name: "a control plane rolling at its version does not pick up a new one",
			in: plan.TopologyUpgradeInput{
				Version: "v1.32.0", ControlPlane: kcpUpgrading("v1.31.0"),
				MachineDeployments: ws(worker("md-0", "v1.31.0")),
			},
			want: want{
				cp: "v1.31.0", mds: versions("md-0", "v1.31.0"),
				cpPlan: []string{"v1.32.0"}, workerPlan: []string{"v1.32.0"}, step: "v1.31.0",
				reason: upgrading,
			},
		},
		{
			name: "a provisioning control plane does not pick up a new version",
			in: plan.TopologyUpgradeInput{
				Version:      "v1.32.0",
				ControlPlane: plan.ControlPlaneVersionState{Exists: true, Version: "v1.31.0", Provisioning: true, Kind: "KubeadmControlPlane"},
			},
			want: want{
				cp: "v1.31.0", cpPlan: []string{"v1.32.0"}, step: "v1.31.0", reason: upgrading,
				message: []string{"KubeadmControlPlane pending upgrade to version v1.32.0, waiting for it to finish provisioning"},
			},
		},
		{
			name: "the control plane stable at the version: the first worker follows, the next waits (concurrency 1)",
			in: plan.TopologyUpgradeInput{
				Version: "v1.31.0", ControlPlane: kcp("v1.31.0"),
				MachineDeployments: ws(worker("md-0", "v1.30.2"), worker("md-1", "v1.30.2")),
			},
			want: want{
				cp: "v1.31.0", mds: versions("md-0", "v1.31.0", "md-1", "v1.30.2"),
				workerPlan: []string{"v1.31.0"}, step: "v1.31.0", reason: upgrading,
				message: []string{
					"MachineDeployment md-0 upgrading to version v1.31.0",
					"MachineDeployment md-1 pending upgrade to version v1.31.0, waiting for MachineDeployment md-0 to finish upgrading (topology.cluster.x-k8s.io/upgrade-concurrency: 1)",
				},
			},
		},
		{
			name: "a worker still rolling counts against the concurrency",
			in: plan.TopologyUpgradeInput{
				Version: "v1.31.0", ControlPlane: kcp("v1.31.0"),
				MachineDeployments: ws(workerRolling(worker("md-0", "v1.31.0")), worker("md-1", "v1.30.2")),
			},
			want: want{
				cp: "v1.31.0", mds: versions("md-0", "v1.31.0", "md-1", "v1.30.2"),
				workerPlan: []string{"v1.31.0"}, step: "v1.31.0", reason: upgrading,
				message: []string{"MachineDeployment md-0 upgrading", "md-1 pending upgrade to version v1.31.0, waiting for MachineDeployment md-0 to finish upgrading"},
			},
		},
		{
			name: "concurrency 2: two workers at once, the third waits",
			in: plan.TopologyUpgradeInput{
				Version: "v1.31.0", ControlPlane: kcp("v1.31.0"), Concurrency: 2,
				MachineDeployments: ws(worker("md-0", "v1.30.2"), worker("md-1", "v1.30.2"), worker("md-2", "v1.30.2")),
			},
			want: want{
				cp: "v1.31.0", mds: versions("md-0", "v1.31.0", "md-1", "v1.31.0", "md-2", "v1.30.2"),
				workerPlan: []string{"v1.31.0"}, step: "v1.31.0", reason: upgrading,
				message: []string{"MachineDeployments md-0, md-1 upgrading to version v1.31.0", "upgrade-concurrency: 2"},
			},
		},
		{
			name: "MachineDeployments and MachinePools each have their own concurrency",
			in: plan.TopologyUpgradeInput{
				Version: "v1.31.0", ControlPlane: kcp("v1.31.0"),
				MachineDeployments: ws(worker("md-0", "v1.30.2"), worker("md-1", "v1.30.2")),
				MachinePools:       ws(worker("mp-0", "v1.30.2"), worker("mp-1", "v1.30.2")),
			},
			want: want{
				cp: "v1.31.0", mds: versions("md-0", "v1.31.0", "md-1", "v1.30.2"), mps: versions("mp-0", "v1.31.0", "mp-1", "v1.30.2"),
				workerPlan: []string{"v1.31.0"}, step: "v1.31.0", reason: upgrading,
				message: []string{"MachinePool mp-0 upgrading to version v1.31.0", "MachinePool mp-1 pending upgrade"},
			},
		},
		{
			name: "upgrading workers hold the control plane's next version",
			in: plan.TopologyUpgradeInput{
				Version: "v1.32.0", ControlPlane: kcp("v1.31.0"),
				MachineDeployments: ws(workerRolling(worker("md-0", "v1.31.0")), worker("md-1", "v1.31.0")),
				MachinePools:       ws(workerRolling(worker("mp-0", "v1.31.0"))),
			},
			want: want{
				cp: "v1.31.0", mds: versions("md-0", "v1.31.0", "md-1", "v1.31.0"), mps: versions("mp-0", "v1.31.0"),
				cpPlan: []string{"v1.32.0"}, workerPlan: []string{"v1.32.0"}, step: "v1.31.0", reason: upgrading,
				message: []string{
					"KubeadmControlPlane pending upgrade to version v1.32.0, waiting for MachineDeployment md-0 and MachinePool mp-0 to finish upgrading",
					"MachineDeployment md-1 pending upgrade to version v1.32.0",
				},
			},
		},
		{
			name: "the workers finish: the condition clears",
			in: plan.TopologyUpgradeInput{
				Version: "v1.31.0", ControlPlane: kcp("v1.31.0"),
				MachineDeployments: ws(worker("md-0", "v1.31.0")),
			},
			want: want{cp: "v1.31.0", mds: versions("md-0", "v1.31.0")},
		},
		{
			name: "the last worker still rolling at the version keeps the condition",
			in: plan.TopologyUpgradeInput{
				Version: "v1.31.0", ControlPlane: kcp("v1.31.0"),
				MachineDeployments: ws(workerRolling(worker("md-0", "v1.31.0"))),
			},
			want: want{
				cp: "v1.31.0", mds: versions("md-0", "v1.31.0"), reason: upgrading,
				message: []string{"MachineDeployment md-0 upgrading to version v1.31.0"},
			},
		},
		{
			name: "a worker's object name is the one messages use",
			in: plan.TopologyUpgradeInput{
				Version: "v1.31.0", ControlPlane: kcp("v1.31.0"),
				MachineDeployments: ws(plan.WorkerVersionState{Name: "md-0", ObjectName: "c1-md-0-x7k2p", Exists: true, Version: "v1.30.2"}),
			},
			want: want{
				cp: "v1.31.0", mds: versions("md-0", "v1.31.0"), step: "v1.31.0", reason: upgrading,
				message: []string{"MachineDeployment c1-md-0-x7k2p upgrading to version v1.31.0"},
			},
		},
		{
			name: "no kind given: the message says control plane",
			in:   plan.TopologyUpgradeInput{Version: "v1.31.0", ControlPlane: plan.ControlPlaneVersionState{Exists: true, Version: "v1.30.0"}},
			want: want{cp: "v1.31.0", step: "v1.31.0", reason: upgrading, message: []string{"* control plane upgrading to version v1.31.0"}},
		},
	})
}

func TestPlanTopologyUpgradeHoldAndDefer(t *testing.T) {
	runDecisions(t, []decisionCase{
		{
			name: "hold-upgrade-sequence holds its worker and every one after it",
			in: plan.TopologyUpgradeInput{
				Version: "v1.31.0", ControlPlane: kcp("v1.31.0"), Concurrency: 5,
				MachineDeployments: ws(worker("md-0", "v1.30.2"), held(worker("md-1", "v1.30.2")), worker("md-2", "v1.30.2")),
			},
			want: want{
				cp: "v1.31.0", mds: versions("md-0", "v1.31.0", "md-1", "v1.30.2", "md-2", "v1.30.2"),
				workerPlan: []string{"v1.31.0"}, step: "v1.31.0", reason: upgrading,
				message: []string{
					"MachineDeployment md-0 upgrading to version v1.31.0",
					"MachineDeployments md-1, md-2 upgrade to version v1.31.0 held by the topology.cluster.x-k8s.io/hold-upgrade-sequence annotation on md-1",
				},
			},
		},
		{
			name: "only held workers left: the reason says the user holds them",
			in: plan.TopologyUpgradeInput{
				Version: "v1.31.0", ControlPlane: kcp("v1.31.0"),
				MachineDeployments: ws(worker("md-0", "v1.31.0"), held(worker("md-1", "v1.30.2")), worker("md-2", "v1.30.2")),
			},
			want: want{
				cp: "v1.31.0", mds: versions("md-0", "v1.31.0", "md-1", "v1.30.2", "md-2", "v1.30.2"),
				workerPlan: []string{"v1.31.0"}, step: "v1.31.0",
				reason: clusterv1.ClusterTopologyReconciledMachineDeploymentsUpgradeDeferredReason,
			},
		},
		{
			name: "a hold on a worker already at the version still holds the ones after it",
			in: plan.TopologyUpgradeInput{
				Version: "v1.31.0", ControlPlane: kcp("v1.31.0"),
				MachineDeployments: ws(held(worker("md-0", "v1.31.0")), worker("md-1", "v1.30.2")),
			},
			want: want{
				cp: "v1.31.0", mds: versions("md-0", "v1.31.0", "md-1", "v1.30.2"),
				workerPlan: []string{"v1.31.0"}, step: "v1.31.0",
				reason:  clusterv1.ClusterTopologyReconciledMachineDeploymentsUpgradeDeferredReason,
				message: []string{"MachineDeployment md-1 upgrade to version v1.31.0 held by the topology.cluster.x-k8s.io/hold-upgrade-sequence annotation on md-0"},
			},
		},
		{
			name: "defer-upgrade skips its worker; the next one goes",
			in: plan.TopologyUpgradeInput{
				Version: "v1.31.0", ControlPlane: kcp("v1.31.0"),
				MachineDeployments: ws(deferred(worker("md-0", "v1.30.2")), worker("md-1", "v1.30.2")),
			},
			want: want{
				cp: "v1.31.0", mds: versions("md-0", "v1.30.2", "md-1", "v1.31.0"),
				workerPlan: []string{"v1.31.0"}, step: "v1.31.0", reason: upgrading,
				message: []string{"MachineDeployment md-0 upgrade to version v1.31.0 deferred by the topology.cluster.x-k8s.io/defer-upgrade annotation"},
			},
		},
		{
			name: "a deferred MachinePool alone: the MachinePools reason",
			in: plan.TopologyUpgradeInput{
				Version: "v1.31.0", ControlPlane: kcp("v1.31.0"),
				MachineDeployments: ws(worker("md-0", "v1.31.0")),
				MachinePools:       ws(deferred(worker("mp-0", "v1.30.2"))),
			},
			want: want{
				cp: "v1.31.0", mds: versions("md-0", "v1.31.0"), mps: versions("mp-0", "v1.30.2"),
				workerPlan: []string{"v1.31.0"}, step: "v1.31.0",
				reason: clusterv1.ClusterTopologyReconciledMachinePoolsUpgradeDeferredReason,
			},
		},
		{
			name: "a MachineDeployment hold does not hold the MachinePools",
			in: plan.TopologyUpgradeInput{
				Version: "v1.31.0", ControlPlane: kcp("v1.31.0"),
				MachineDeployments: ws(held(worker("md-0", "v1.30.2"))),
				MachinePools:       ws(worker("mp-0", "v1.30.2")),
			},
			want: want{
				cp: "v1.31.0", mds: versions("md-0", "v1.30.2"), mps: versions("mp-0", "v1.31.0"),
				workerPlan: []string{"v1.31.0"}, step: "v1.31.0", reason: clusterv1.ClusterTopologyReconciledMachineDeploymentsUpgradeDeferredReason,
			},
		},
		{
			name: "a held worker does not hold the control plane: it stays behind while the control plane goes on",
			in: plan.TopologyUpgradeInput{
				Version: "v1.32.0", ControlPlane: kcp("v1.31.0"),
				MachineDeployments: ws(held(worker("md-0", "v1.30.2"))),
			},
			want: want{
				cp: "v1.32.0", mds: versions("md-0", "v1.30.2"),
				workerPlan: []string{"v1.32.0"}, step: "v1.32.0", reason: upgrading,
			},
		},
	})
}

func TestPlanTopologyUpgradeChained(t *testing.T) {
	class := []string{"v1.29.3", "v1.30.0", "v1.30.5", "v1.31.0", "v1.31.2", "v1.32.1", "v1.33.0", "v1.33.4", "v1.34.0"}
	runDecisions(t, []decisionCase{
		{
			name: "the control plane goes through the last listed version of each minor, one step at a time",
			in: plan.TopologyUpgradeInput{
				Version: "v1.33.0", KubernetesVersions: class, ControlPlane: kcp("v1.30.0"),
				MachineDeployments: ws(worker("md-0", "v1.30.0")),
			},
			want: want{
				cp: "v1.31.2", mds: versions("md-0", "v1.30.0"),
				cpPlan:     []string{"v1.32.1", "v1.33.0"},
				workerPlan: []string{"v1.33.0"}, // three minors: the workers may skip straight to the target
				step:       "v1.31.2", reason: upgrading,
				message: []string{"KubeadmControlPlane upgrading to version v1.31.2 (then v1.32.1, v1.33.0)"},
			},
		},
		{
			name: "between steps the workers do not move when they may skip",
			in: plan.TopologyUpgradeInput{
				Version: "v1.33.0", KubernetesVersions: class, ControlPlane: kcp("v1.31.2"),
				MachineDeployments: ws(worker("md-0", "v1.30.0")),
			},
			want: want{
				cp: "v1.32.1", mds: versions("md-0", "v1.30.0"),
				cpPlan: []string{"v1.33.0"}, workerPlan: []string{"v1.33.0"}, step: "v1.32.1", reason: upgrading,
			},
		},
		{
			name: "the last step reached: the workers go straight to the target",
			in: plan.TopologyUpgradeInput{
				Version: "v1.33.0", KubernetesVersions: class, ControlPlane: kcp("v1.33.0"),
				MachineDeployments: ws(worker("md-0", "v1.30.0")),
			},
			want: want{
				cp: "v1.33.0", mds: versions("md-0", "v1.33.0"), step: "v1.33.0", reason: upgrading,
			},
		},
		{
			name: "four minors: the workers must stop on the way, at the control plane's version for that minor",
			in: plan.TopologyUpgradeInput{
				Version: "v1.34.0", KubernetesVersions: class, ControlPlane: kcp("v1.30.5"),
				MachineDeployments: ws(worker("md-0", "v1.30.5")),
			},
			want: want{
				cp: "v1.31.2", mds: versions("md-0", "v1.30.5"),
				cpPlan:     []string{"v1.32.1", "v1.33.4", "v1.34.0"},
				workerPlan: []string{"v1.33.4", "v1.34.0"},
				step:       "v1.31.2", reason: upgrading,
			},
		},
		{
			name: "the control plane at the workers' stop waits for them to catch up",
			in: plan.TopologyUpgradeInput{
				Version: "v1.34.0", KubernetesVersions: class, ControlPlane: kcp("v1.33.4"),
				MachineDeployments: ws(worker("md-0", "v1.30.5"), worker("md-1", "v1.30.5")),
			},
			want: want{
				cp: "v1.33.4", mds: versions("md-0", "v1.33.4", "md-1", "v1.30.5"),
				cpPlan: []string{"v1.34.0"}, workerPlan: []string{"v1.33.4", "v1.34.0"}, step: "v1.33.4", reason: upgrading,
				message: []string{
					"KubeadmControlPlane pending upgrade to version v1.34.0, waiting for MachineDeployments md-0, md-1 to reach v1.33.4 first",
					"MachineDeployment md-0 upgrading to version v1.33.4 (then v1.34.0)",
					"MachineDeployment md-1 pending upgrade to version v1.33.4, v1.34.0, waiting for MachineDeployment md-0 to finish",
				},
			},
		},
		{
			name: "a worker already at the stop waits for the control plane's next step",
			in: plan.TopologyUpgradeInput{
				Version: "v1.34.0", KubernetesVersions: class, ControlPlane: kcp("v1.33.4"), Concurrency: 3,
				MachineDeployments: ws(worker("md-0", "v1.30.5"), worker("md-1", "v1.33.4")),
			},
			want: want{
				cp: "v1.33.4", mds: versions("md-0", "v1.33.4", "md-1", "v1.33.4"),
				cpPlan: []string{"v1.34.0"}, workerPlan: []string{"v1.34.0"}, step: "v1.33.4", reason: upgrading,
				message: []string{"MachineDeployment md-1 pending upgrade to version v1.33.4, v1.34.0, waiting for the KubeadmControlPlane to move to its next version"},
			},
		},
		{
			name: "the workers caught up: the control plane takes its last step",
			in: plan.TopologyUpgradeInput{
				Version: "v1.34.0", KubernetesVersions: class, ControlPlane: kcp("v1.33.4"),
				MachineDeployments: ws(worker("md-0", "v1.33.4"), worker("md-1", "v1.33.4")),
			},
			want: want{
				cp: "v1.34.0", mds: versions("md-0", "v1.33.4", "md-1", "v1.33.4"),
				workerPlan: []string{"v1.34.0"}, step: "v1.34.0", reason: upgrading,
			},
		},
		{
			name: "a patch upgrade through the list is one step to the target",
			in: plan.TopologyUpgradeInput{
				Version: "v1.30.5", KubernetesVersions: []string{"v1.30.0", "v1.30.2", "v1.30.5", "v1.31.0"}, ControlPlane: kcp("v1.30.0"),
			},
			want: want{cp: "v1.30.5", step: "v1.30.5", reason: upgrading},
		},
		{
			name: "one minor within the list: the target, not a later patch of its minor",
			in: plan.TopologyUpgradeInput{
				Version: "v1.31.0", KubernetesVersions: class, ControlPlane: kcp("v1.30.5"),
			},
			want: want{cp: "v1.31.0", step: "v1.31.0", reason: upgrading},
		},
		{
			name: "MachineDeployments and MachinePools share the workers' plan, from the lowest of them",
			in: plan.TopologyUpgradeInput{
				Version: "v1.34.0", KubernetesVersions: class, ControlPlane: kcp("v1.32.1"),
				MachineDeployments: ws(worker("md-0", "v1.32.1")),
				MachinePools:       ws(worker("mp-0", "v1.30.5")),
			},
			want: want{
				cp: "v1.33.4", mds: versions("md-0", "v1.32.1"), mps: versions("mp-0", "v1.30.5"),
				cpPlan: []string{"v1.34.0"}, workerPlan: []string{"v1.33.4", "v1.34.0"}, step: "v1.33.4", reason: upgrading,
			},
		},
	})
}

func TestPlanTopologyUpgradeRefused(t *testing.T) {
	failed := clusterv1.ClusterTopologyReconciledFailedReason
	runDecisions(t, []decisionCase{
		{
			name: "two minors at once without kubernetesVersions",
			in: plan.TopologyUpgradeInput{
				Version: "v1.32.0", ControlPlane: kcp("v1.30.2"),
				MachineDeployments: ws(worker("md-0", "v1.30.2"), newWorker("md-1")),
			},
			want: want{
				cp: "v1.30.2", mds: versions("md-0", "v1.30.2"), mdsPending: []string{"md-1"}, reason: failed,
				err: "spec.topology.version v1.32.0 is more than one minor version above the control plane's v1.30.2: raise it one minor at a time (next v1.31.x), or list the versions in between in the ClusterClass's spec.kubernetesVersions",
			},
		},
		{
			name: "a minor missing from kubernetesVersions",
			in: plan.TopologyUpgradeInput{
				Version: "v1.33.0", KubernetesVersions: []string{"v1.30.0", "v1.31.0", "v1.33.0"}, ControlPlane: kcp("v1.30.0"),
			},
			want: want{cp: "v1.30.0", reason: failed, err: "the ClusterClass's spec.kubernetesVersions lists no v1.32 version, which the control plane must go through from v1.30.0 to spec.topology.version v1.33.0: add one"},
		},
		{
			name: "a target kubernetesVersions does not list",
			in: plan.TopologyUpgradeInput{
				Version: "v1.31.1", KubernetesVersions: []string{"v1.30.0", "v1.31.0", "v1.31.2"}, ControlPlane: kcp("v1.30.0"),
			},
			want: want{cp: "v1.30.0", reason: failed, err: "spec.topology.version v1.31.1 is not in the ClusterClass's spec.kubernetesVersions"},
		},
		{
			name: "a downgrade",
			in:   plan.TopologyUpgradeInput{Version: "v1.30.0", ControlPlane: kcp("v1.31.0")},
			want: want{cp: "v1.31.0", reason: failed, err: "spec.topology.version v1.30.0 is lower than the control plane's version v1.31.0"},
		},
		{
			name: "a worker above the target",
			in: plan.TopologyUpgradeInput{
				Version: "v1.31.0", ControlPlane: kcp("v1.31.0"), MachineDeployments: ws(worker("md-0", "v1.32.0")),
			},
			want: want{cp: "v1.31.0", mds: versions("md-0", "v1.32.0"), reason: failed, err: "MachineDeployment md-0 runs v1.32.0, above spec.topology.version v1.31.0"},
		},
		{
			name: "a version that does not parse",
			in:   plan.TopologyUpgradeInput{Version: "1.31", MachineDeployments: ws(newWorker("md-0"))},
			want: want{mdsPending: []string{"md-0"}, reason: failed, err: `spec.topology.version "1.31" is not a Kubernetes version`},
		},
		{
			name: "a class version that does not parse",
			in:   plan.TopologyUpgradeInput{Version: "v1.31.0", KubernetesVersions: []string{"v1.30.0", "latest"}, ControlPlane: kcp("v1.30.0")},
			want: want{cp: "v1.30.0", reason: failed, err: `the ClusterClass's spec.kubernetesVersions[1] "latest" is not a Kubernetes version`},
		},
		{
			name: "workers already too far behind the control plane for the skew",
			in: plan.TopologyUpgradeInput{
				Version: "v1.34.0", KubernetesVersions: []string{"v1.33.0", "v1.34.0"}, ControlPlane: kcp("v1.33.0"),
				MachineDeployments: ws(worker("md-0", "v1.29.0")),
			},
			want: want{cp: "v1.33.0", mds: versions("md-0", "v1.29.0"), reason: failed, err: "bring the workers to v1.30 or later first"},
		},
	})
}

func TestPlanTopologyUpgradeBuildMetadata(t *testing.T) {
	// Two builds of one version are different versions: the control plane
	// moves from one to the other, and a worker on the old build follows.
	got := plan.PlanTopologyUpgrade(plan.TopologyUpgradeInput{
		Version:            "v1.31.0+vendor.2",
		ControlPlane:       kcp("v1.31.0+vendor.1"),
		MachineDeployments: []plan.WorkerVersionState{worker("md-0", "v1.31.0+vendor.1")},
	})
	checkDecision(t, got, want{
		cp: "v1.31.0+vendor.2", mds: versions("md-0", "v1.31.0+vendor.1"),
		workerPlan: []string{"v1.31.0+vendor.2"}, step: "v1.31.0+vendor.2", reason: upgrading,
	})
	// Through the class's list, as upstream, a new build of the control
	// plane's own version is not a step: the list cannot reach the target.
	got = plan.PlanTopologyUpgrade(plan.TopologyUpgradeInput{
		Version:            "v1.31.0+vendor.2",
		KubernetesVersions: []string{"v1.31.0+vendor.1", "v1.31.0+vendor.2"},
		ControlPlane:       kcp("v1.31.0+vendor.1"),
	})
	checkDecision(t, got, want{cp: "v1.31.0+vendor.1", reason: clusterv1.ClusterTopologyReconciledFailedReason, err: "is not in the ClusterClass's spec.kubernetesVersions"})
	// Builds named by words cannot be ordered; one that is not the control
	// plane's is taken as the lower.
	got = plan.PlanTopologyUpgrade(plan.TopologyUpgradeInput{
		Version:            "v1.31.0+def",
		ControlPlane:       kcp("v1.31.0+def"),
		MachineDeployments: []plan.WorkerVersionState{worker("md-0", "v1.31.0+def"), worker("md-1", "v1.31.0+abc")},
	})
	checkDecision(t, got, want{
		cp: "v1.31.0+def", mds: versions("md-0", "v1.31.0+def", "md-1", "v1.31.0+def"),
		step: "v1.31.0+def", reason: upgrading,
	})
	// "1.31.0" and "v1.31.0" are one version: nothing to do.
	got = plan.PlanTopologyUpgrade(plan.TopologyUpgradeInput{
		Version: "v1.31.0", ControlPlane: kcp("1.31.0"), MachineDeployments: []plan.WorkerVersionState{worker("md-0", "1.31.0")},
	})
	checkDecision(t, got, want{cp: "1.31.0", mds: versions("md-0", "1.31.0")})
}

func TestStatusUpgradePlan(t *testing.T) {
	if got := plan.StatusUpgradePlan(nil); got != nil {
		t.Errorf("empty plan gives %v, want nil", got)
	}
	got := plan.StatusUpgradePlan([]string{"v1.31.2", "v1.32.1"})
	want := []clusterv1.StatusUpgradePlanVersion{{Version: "v1.31.2"}, {Version: "v1.32.1"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	long := make([]string, 40)
	for i := range long {
		long[i] = "v1.31.0"
	}
	if n := len(plan.StatusUpgradePlan(long)); n != 32 {
		t.Errorf("a 40-step plan shows %d steps, want the API's 32", n)
	}
}
