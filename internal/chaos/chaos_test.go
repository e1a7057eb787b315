package chaos

import (
	"bytes"
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"capstan.dev/capstan/internal/testenv"
)

// TestChaos is the suite's short chaos run: four in-memory clusters created,
// scaled, upgraded and half deleted while the manager is killed ten times
// and the plane once; everything must converge with no finding. The seed
// is logged; CAPSTAN_CHAOS_SEED repeats a run.
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a management plane and a manager it kills")
	}
	seed := NewSeed()
	if s := os.Getenv("CAPSTAN_CHAOS_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseInt(s, 10, 64); err != nil {
			t.Fatalf("CAPSTAN_CHAOS_SEED=%s: %v", s, err)
		}
	}
	t.Logf("seed %d (CAPSTAN_CHAOS_SEED=%d repeats this run)", seed, seed)
	bin, remove, err := testenv.Binary()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(remove)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	dir := t.TempDir()
	var progress bytes.Buffer
	res, err := Run(ctx, Config{
		Binary: bin, Dir: dir, Clusters: 4, ManagerKills: 10, PlaneKills: 1, Seed: seed,
		Gaps:         Gaps{MinAfter: time.Second, MaxAfter: 4 * time.Second, MaxDown: time.Second},
		MachineDelay: 2 * time.Second, PhaseTimeout: 2 * time.Minute, Progress: &progress,
	})
	t.Log("\n" + progress.String())
	if res != nil {
		var table bytes.Buffer
		res.Table(&table)
		t.Log("\n" + table.String())
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Findings) > 0 || len(res.Phases) != len(phaseNames) {
		t.Errorf("the run ended with %d findings after %d of %d phases (seed %d; the manager's log is kept below)", len(res.Findings), len(res.Phases), len(phaseNames), seed)
		if log, err := os.ReadFile(dir + "/manager.log"); err == nil {
			t.Logf("manager log, last 200 lines:\n%s", lastLines(string(log), 200))
		}
	}
	if res.ManagerKills != 10 || res.PlaneKills != 1 {
		t.Errorf("%d manager and %d plane kills done, want 10 and 1", res.ManagerKills, res.PlaneKills)
	}
	// A kill at rest proves little: most must land while there is work.
	if total := res.ManagerKills + res.PlaneKills; res.KillsMidWork*2 < total {
		t.Errorf("only %d of %d kills landed while the clusters were changing; the schedule's gaps are too long for the phases", res.KillsMidWork, total)
	}
}

// lastLines is the end of a log.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
