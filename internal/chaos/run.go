package chaos

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	controlplanev1 "capstan.dev/capstan/api/controlplane/kubeadm/v1beta2"
	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/bench"
	"capstan.dev/capstan/internal/patch"
	"capstan.dev/capstan/internal/scheme"
)

// Config is one chaos run.
type Config struct {
	// Binary is the capstan binary that runs the plane and the manager.
	Binary string
	// Dir holds the plane's state directory and the children's logs.
	Dir string
	// Clusters are created, scaled, upgraded; every other one is deleted.
	Clusters int
	// ManagerKills and PlaneKills are how many faults of each the run puts in.
	ManagerKills, PlaneKills int
	// Seed makes the kill schedule; the same seed gives the same one.
	Seed int64
	// Gaps bound the waits between faults and how long a process stays down.
	Gaps Gaps
	// MachineDelay is the simulated boot of every machine; the node, API
	// server and etcd stages take a quarter of it.
	MachineDelay time.Duration
	// PhaseTimeout bounds each phase's wait to converge.
	PhaseTimeout time.Duration
	// Progress, when set, gets a line per fault and now and then while
	// waiting.
	Progress io.Writer
}

// PhaseResult is what one phase took.
type PhaseResult struct {
	Name  string `json:"name"`
	Kills int    `json:"kills"`
	// Seconds from the phase's first write to convergence, and from the
	// last fault's restart to convergence.
	Seconds              float64 `json:"seconds"`
	SecondsAfterLastKill float64 `json:"secondsAfterLastKill"`
	Converged            bool    `json:"converged"`
}

// Result is what a run did and found.
type Result struct {
	Seed         int64 `json:"seed"`
	Clusters     int   `json:"clusters"`
	ManagerKills int   `json:"managerKills"`
	PlaneKills   int   `json:"planeKills"`
	// KillsMidWork are the kills that found the run not at rest (a check
	// just before found something to do): those that can break something.
	KillsMidWork int           `json:"killsMidWork"`
	Phases       []PhaseResult `json:"phases"`
	// Findings are what the last check found (none when the run
	// converged), FindingsByKind their count.
	Findings       []Finding           `json:"findings"`
	FindingsByKind map[FindingKind]int `json:"findingsByKind"`
	// Writes are the API server's writes over every plane it ran, from
	// its apiserver_request_total; DriverWrites are the run's own.
	Writes       float64 `json:"writes"`
	DriverWrites int     `json:"driverWrites"`
	Conflicts    float64 `json:"conflicts"`
	// Restarts of the manager and the plane after a kill, and
	// UnplannedRestarts of either after it exited by itself.
	Restarts          int     `json:"restarts"`
	UnplannedRestarts int     `json:"unplannedRestarts"`
	Seconds           float64 `json:"seconds"`
}

// namespace holds the run's objects.
const namespace = "chaos"

// phaseNames are the run's phases in order.
var phaseNames = []string{"create", "scale", "upgrade", "delete"}

// run is the state of one run.
type run struct {
	cfg     Config
	plane   *process
	manager *process
	client  client.Client
	rest    *rest.Config
	res     *Result
	want    Want
	// writes: the total over planes before the current one, and the
	// current plane's count when it was last read.
	writesBefore bench.RequestCounts
	writesSum    bench.RequestCounts
	lastRestart  time.Time
}

// Run drives the clusters through every phase under the schedule's faults
// and checks the end state. Its error is about the run itself (a plane
// that does not start); what the checks found is in the Result.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if cfg.Clusters < 1 || cfg.ManagerKills < 0 || cfg.PlaneKills < 0 {
		return nil, fmt.Errorf("--clusters must be at least 1 and --kills at least 0 (got %d and %d)", cfg.Clusters, cfg.ManagerKills)
	}
	if cfg.PhaseTimeout == 0 {
		cfg.PhaseTimeout = 10 * time.Minute
	}
	started := time.Now()
	state := filepath.Join(cfg.Dir, "state")
	r := &run{cfg: cfg, res: &Result{Seed: cfg.Seed, Clusters: cfg.Clusters}}
	r.plane = &process{name: "plane", bin: cfg.Binary, log: filepath.Join(cfg.Dir, "plane.log"), ready: true, timeout: 5 * time.Minute,
		args: []string{"up", "--foreground", "--controllers=false", "--state-dir", state, "--notify-fd", "3"}}
	r.manager = &process{name: "manager", bin: cfg.Binary, log: filepath.Join(cfg.Dir, "manager.log"),
		args: []string{"manager", "--kubeconfig", filepath.Join(state, "kubeconfig"), "--in-memory",
			"--metrics-bind-address", "0", "--health-probe-bind-address", "0", "--webhook-bind-address", "0",
			"--kube-api-qps", "200", "--kube-api-burst", "400"}}
	runCtx, cancel := context.WithCancel(ctx)
	defer func() {
		cancel()
		r.manager.kill()
		r.plane.kill()
	}()
	if err := r.plane.start(runCtx); err != nil {
		return nil, err
	}
	var err error
	if r.rest, err = clientcmd.BuildConfigFromFlags("", filepath.Join(state, "kubeconfig")); err != nil {
		return nil, err
	}
	r.rest.QPS, r.rest.Burst = 200, 400
	if r.client, err = client.New(r.rest, client.Options{Scheme: scheme.New()}); err != nil {
		return nil, err
	}
	if r.writesBefore, err = bench.ScrapeRequests(ctx, r.rest); err != nil {
		return nil, err
	}
	if err := r.manager.start(runCtx); err != nil {
		return nil, err
	}
	r.progress("Chaos run: seed %d, %d clusters, %d manager kills, %d plane kills; logs in %s", cfg.Seed, cfg.Clusters, cfg.ManagerKills, cfg.PlaneKills, cfg.Dir)

	schedule := Plan(cfg.Seed, len(phaseNames), cfg.ManagerKills, cfg.PlaneKills, cfg.Gaps)
	steps := []func(context.Context) error{r.create, r.scale, r.upgrade, r.delete}
	var last []Finding
	for i, step := range steps {
		phaseStart := time.Now()
		r.progress("Phase %s: %d faults", phaseNames[i], len(schedule[i]))
		if err := step(runCtx); err != nil {
			return r.res, fmt.Errorf("phase %s: %w", phaseNames[i], err)
		}
		r.lastRestart = phaseStart
		if err := r.faults(runCtx, schedule[i]); err != nil {
			return r.res, fmt.Errorf("phase %s: %w", phaseNames[i], err)
		}
		var converged bool
		last, converged = r.converge(runCtx, phaseNames[i])
		now := time.Now()
		r.res.Phases = append(r.res.Phases, PhaseResult{Name: phaseNames[i], Kills: len(schedule[i]), Converged: converged,
			Seconds: now.Sub(phaseStart).Seconds(), SecondsAfterLastKill: now.Sub(r.lastRestart).Seconds()})
		r.progress("Phase %s: converged=%v in %.1fs (%.1fs after the last fault)", phaseNames[i], converged, now.Sub(phaseStart).Seconds(), now.Sub(r.lastRestart).Seconds())
		if !converged {
			break
		}
	}
	r.res.Findings = last
	r.res.FindingsByKind = CountByKind(last)
	r.countWrites(ctx)
	r.res.Writes = r.writesSum.Writes()
	r.res.Conflicts = r.writesSum.Conflicts
	r.res.UnplannedRestarts = r.manager.unplannedExits() + r.plane.unplannedExits()
	r.res.Seconds = time.Since(started).Seconds()
	return r.res, nil
}

func (r *run) progress(format string, args ...any) {
	if r.cfg.Progress != nil {
		fmt.Fprintf(r.cfg.Progress, "[%s] "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
	}
}

// faults carries out one phase's kills.
func (r *run) faults(ctx context.Context, kills []Kill) error {
	for _, k := range kills {
		if err := sleep(ctx, k.After); err != nil {
			return err
		}
		if s, err := r.snapshot(ctx); err == nil && len(Check(s, r.want)) > 0 {
			r.res.KillsMidWork++
		}
		p := r.manager
		if k.Target == Plane {
			p = r.plane
			r.countWrites(ctx)
			r.res.PlaneKills++
		} else {
			r.res.ManagerKills++
		}
		r.progress("kill -9 %s (%d manager, %d plane kills so far), down %s", k.Target, r.res.ManagerKills, r.res.PlaneKills, k.Down)
		p.kill()
		if err := sleep(ctx, k.Down); err != nil {
			return err
		}
		if err := p.start(ctx); err != nil {
			return err
		}
		r.res.Restarts++
		if k.Target == Plane {
			// A new plane counts its requests from zero.
			var err error
			if r.writesBefore, err = bench.ScrapeRequests(ctx, r.rest); err != nil {
				return err
			}
		}
		r.lastRestart = time.Now()
	}
	return nil
}

// countWrites adds the current plane's writes since they were last read.
func (r *run) countWrites(ctx context.Context) {
	now, err := bench.ScrapeRequests(ctx, r.rest)
	if err != nil {
		return
	}
	d := now.Minus(r.writesBefore)
	if r.writesSum.ByVerbResource == nil {
		r.writesSum = bench.RequestCounts{ByVerbResource: map[string]float64{}, ConflictsByKey: map[string]float64{}}
	}
	for k, v := range d.ByVerbResource {
		r.writesSum.ByVerbResource[k] += v
	}
	r.writesSum.Conflicts += d.Conflicts
	r.writesBefore = now
}

// converge looks until the checks find nothing or the phase's time is up,
// and returns the last findings.
func (r *run) converge(ctx context.Context, phase string) ([]Finding, bool) {
	deadline := time.Now().Add(r.cfg.PhaseTimeout)
	lastReport := time.Now()
	var findings []Finding
	for {
		s, err := r.snapshot(ctx)
		if err == nil {
			findings = Check(s, r.want)
			if len(findings) == 0 {
				return nil, true
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return findings, false
		}
		if time.Since(lastReport) >= 15*time.Second {
			lastReport = time.Now()
			if err != nil {
				r.progress("  %s: cannot list yet: %v", phase, err)
			} else {
				r.progress("  %s: %d findings %v, e.g. %s", phase, len(findings), CountByKind(findings), findings[0])
			}
		}
		_ = sleep(ctx, time.Second)
	}
}

// snapshot lists every kind the checks read in the run's namespace.
func (r *run) snapshot(ctx context.Context) (Snapshot, error) {
	var s Snapshot
	in := client.InNamespace(namespace)
	clusters, kcps, mds, mss, machines := &clusterv1.ClusterList{}, &controlplanev1.KubeadmControlPlaneList{}, &clusterv1.MachineDeploymentList{}, &clusterv1.MachineSetList{}, &clusterv1.MachineList{}
	for _, l := range []client.ObjectList{clusters, kcps, mds, mss, machines} {
		if err := r.client.List(ctx, l, in); err != nil {
			return s, err
		}
	}
	s.Clusters, s.ControlPlanes, s.Deployments, s.Sets, s.Machines = clusters.Items, kcps.Items, mds.Items, mss.Items, machines.Items
	for _, gvk := range metadataKinds {
		l := &metav1.PartialObjectMetadataList{}
		l.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := r.client.List(ctx, l, in); err != nil {
			return s, err
		}
		for _, o := range l.Items {
			o.Kind = gvk.Kind
			s.Others = append(s.Others, o)
		}
	}
	return s, nil
}

// metadataKinds are the kinds the checks read by metadata alone.
var metadataKinds = []schema.GroupVersionKind{
	{Group: "infrastructure.cluster.x-k8s.io", Version: "v1beta2", Kind: "InMemoryCluster"},
	{Group: "infrastructure.cluster.x-k8s.io", Version: "v1beta2", Kind: "InMemoryMachine"},
	{Group: "bootstrap.cluster.x-k8s.io", Version: "v1beta2", Kind: "KubeadmConfig"},
	{Version: "v1", Kind: "Secret"},
}

func clusterName(i int) string { return fmt.Sprintf("c%d", i) }

// create applies every cluster: one control-plane machine and one worker
// each, their simulated stages as short as the run asks.
func (r *run) create(ctx context.Context) error {
	objs, err := bench.Manifests(namespace, r.cfg.Clusters, 1)
	if err != nil {
		return err
	}
	d := r.cfg.MachineDelay
	delays := map[string]any{"machine": d.String(), "node": (d / 4).String(), "apiServer": (d / 4).String(), "etcd": (d / 4).String()}
	version := ""
	for _, o := range objs {
		switch o.GetKind() {
		case "InMemoryCluster":
			if err := unstructured.SetNestedField(o.Object, delays, "spec", "delays"); err != nil {
				return err
			}
		case "KubeadmControlPlane":
			version, _, _ = unstructured.NestedString(o.Object, "spec", "version")
		}
	}
	r.want = Want{Clusters: map[string]ClusterWant{}, Deleted: map[string]bool{}}
	for i := range r.cfg.Clusters {
		r.want.Clusters[clusterName(i)] = ClusterWant{ControlPlane: 1, Workers: 1, Version: version}
	}
	for _, o := range objs {
		if err := r.write(ctx, func() error { return client.IgnoreAlreadyExists(r.client.Create(ctx, o)) }); err != nil {
			return fmt.Errorf("creating %s %s: %w", o.GetKind(), o.GetName(), err)
		}
	}
	return nil
}

// scale makes each control plane three machines and each cluster two workers.
func (r *run) scale(ctx context.Context) error {
	return r.patchEach(ctx, func(w *ClusterWant) { w.ControlPlane, w.Workers = 3, 2 })
}

// upgrade rolls every remaining cluster to the next patch version.
func (r *run) upgrade(ctx context.Context) error {
	return r.patchEach(ctx, func(w *ClusterWant) { w.Version = nextPatch(w.Version) })
}

// delete deletes every other cluster (c1, c3, ...).
func (r *run) delete(ctx context.Context) error {
	for i := 1; i < r.cfg.Clusters; i += 2 {
		name := clusterName(i)
		c := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
		if err := r.write(ctx, func() error { return client.IgnoreNotFound(r.client.Delete(ctx, c)) }); err != nil {
			return fmt.Errorf("deleting Cluster %s: %w", name, err)
		}
		delete(r.want.Clusters, name)
		r.want.Deleted[name] = true
	}
	return nil
}

// patchEach changes every remaining cluster's wants and patches its
// control plane and MachineDeployment to them.
func (r *run) patchEach(ctx context.Context, change func(*ClusterWant)) error {
	for i := range r.cfg.Clusters {
		name := clusterName(i)
		w, ok := r.want.Clusters[name]
		if !ok {
			continue
		}
		change(&w)
		r.want.Clusters[name] = w
		patches := []struct {
			kind, group, name string
			body              client.Patch
		}{
			{"KubeadmControlPlane", controlplanev1.GroupVersion.Group, name + "-cp",
				patch.Merge(map[string]any{"spec": map[string]any{"replicas": w.ControlPlane, "version": w.Version}})},
			{"MachineDeployment", clusterv1.GroupVersion.Group, name + "-md",
				patch.Merge(map[string]any{"spec": map[string]any{"replicas": w.Workers, "template": map[string]any{"spec": map[string]any{"version": w.Version}}}})},
		}
		for _, p := range patches {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(schema.GroupVersionKind{Group: p.group, Version: "v1beta2", Kind: p.kind})
			u.SetNamespace(namespace)
			u.SetName(p.name)
			if err := r.write(ctx, func() error { return r.client.Patch(ctx, u, p.body) }); err != nil {
				return fmt.Errorf("patching %s %s: %w", p.kind, p.name, err)
			}
		}
	}
	return nil
}

// write makes one of the run's own writes, trying again for a while: the
// plane may be coming back from a kill.
func (r *run) write(ctx context.Context, do func() error) error {
	var err error
	for range 30 {
		r.res.DriverWrites++
		if err = do(); err == nil {
			return nil
		}
		if serr := sleep(ctx, time.Second); serr != nil {
			return serr
		}
	}
	return err
}

// nextPatch is v with its patch number one higher (v1.35.8 -> v1.35.9).
func nextPatch(v string) string {
	i := strings.LastIndex(v, ".")
	n, err := strconv.Atoi(v[i+1:])
	if i < 0 || err != nil {
		return v
	}
	return v[:i+1] + strconv.Itoa(n+1)
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// NewSeed is a seed for a run that was given none.
func NewSeed() int64 { return rand.Int64N(1 << 31) }

// Table prints a result for people.
func (r *Result) Table(w io.Writer) {
	fmt.Fprintf(w, "Chaos run: seed %d, %d clusters, %.0fs\n", r.Seed, r.Clusters, r.Seconds)
	fmt.Fprintf(w, "  kills:               %d manager, %d plane, %d of them mid-work (%d restarts, %d unplanned)\n", r.ManagerKills, r.PlaneKills, r.KillsMidWork, r.Restarts, r.UnplannedRestarts)
	fmt.Fprintln(w, "  phases (seconds to converge from the first write / after the last fault):")
	for _, p := range r.Phases {
		state := "converged"
		if !p.Converged {
			state = "NOT converged"
		}
		fmt.Fprintf(w, "    %-8s %3d faults  %7.1fs  %7.1fs  %s\n", p.Name, p.Kills, p.Seconds, p.SecondsAfterLastKill, state)
	}
	fmt.Fprintf(w, "  API writes:          %.0f (%d by the run itself), %.0f conflicts\n", r.Writes, r.DriverWrites, r.Conflicts)
	fmt.Fprintf(w, "  findings:            %d duplicates, %d orphans, %d stuck finalizers, %d not converged\n",
		r.FindingsByKind[Duplicate], r.FindingsByKind[Orphan], r.FindingsByKind[StuckFinalizer], r.FindingsByKind[NotConverged])
	for i, f := range r.Findings {
		if i == 30 {
			fmt.Fprintf(w, "    ... and %d more\n", len(r.Findings)-i)
			break
		}
		fmt.Fprintf(w, "    %s\n", f)
	}
}

// Dir makes a directory for a run under parent ("" for the system's).
func Dir(parent string) (string, error) { return os.MkdirTemp(parent, "capstan-chaos-") }
