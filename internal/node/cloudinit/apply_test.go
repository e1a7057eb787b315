package cloudinit

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// fakeRunner records commands; it "performs" kubeadm by writing the
// sentinel itself, as the node agent will, and declines swapoff.
type fakeRunner struct {
	ran  []string
	fail string
	root string
}

func (r *fakeRunner) Run(ctx context.Context, cmd RunCommand) error {
	s := cmd.Command().String()
	r.ran = append(r.ran, s)
	switch {
	case r.fail != "" && strings.Contains(s, r.fail):
		return errors.New("exit status 1")
	case strings.HasPrefix(s, "swapoff"):
		return NotSupported("a local machine has no swap to turn off")
	case strings.HasPrefix(s, "kubeadm "):
		p := filepath.Join(r.root, SentinelPath)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		return os.WriteFile(p, []byte("success\n"), 0o644)
	}
	return nil
}

type fullRunner struct {
	fakeRunner
	users []string
	ntp   []string
}

func (r *fullRunner) CreateUser(ctx context.Context, s CreateUser) error {
	r.users = append(r.users, s.User.Name)
	return nil
}

func (r *fullRunner) ConfigureNTP(ctx context.Context, s ConfigureNTP) error {
	r.ntp = append(r.ntp, s.Servers...)
	return nil
}

func planFile(t *testing.T, file, root string) []Step {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	steps, err := Plan(mustParse(t, string(data)), Options{Root: root, Hostname: "m-0"})
	if err != nil {
		t.Fatal(err)
	}
	return steps
}

func outcomes(r Report) map[string]Outcome {
	m := map[string]Outcome{}
	for _, e := range r.Entries {
		m[e.Source] = e.Outcome
	}
	return m
}

// snapshot returns every regular file under root (except the journal) with
// its content and mode.
func snapshot(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, _ := d.Info()
		b, _ := os.ReadFile(p)
		rel, _ := filepath.Rel(root, p)
		out[rel] = info.Mode().String() + " " + string(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestApplyControlPlane(t *testing.T) {
	root := t.TempDir()
	steps := planFile(t, "testdata/kubeadm-controlplane.yaml", root)
	r := &fakeRunner{root: root}
	rep, err := Apply(context.Background(), steps, r)
	if err != nil {
		t.Fatalf("%v\n%s", err, rep)
	}
	if !rep.Complete || rep.Sentinel != filepath.Join(root, SentinelPath) {
		t.Fatalf("not complete:\n%s", rep)
	}
	for path, mode := range map[string]fs.FileMode{
		"etc/kubernetes/pki/ca.crt": 0o640, "etc/kubernetes/pki/ca.key": 0o600,
		"etc/kubernetes/pki/sa.key": 0o600, "run/kubeadm/kubeadm.yaml": 0o640,
	} {
		info, err := os.Stat(filepath.Join(root, path))
		if err != nil {
			t.Fatal(err)
		}
		if info.Mode().Perm() != mode {
			t.Errorf("%s mode %v, want %v", path, info.Mode().Perm(), mode)
		}
	}
	kc, _ := os.ReadFile(filepath.Join(root, "run/kubeadm/kubeadm.yaml"))
	if !strings.Contains(string(kc), "name: 'm-0'") || !strings.Contains(string(kc), "kind: InitConfiguration") {
		t.Errorf("kubeadm.yaml:\n%s", kc)
	}
	want := []string{`hostnamectl set-hostname "m-0"`, "kubeadm init --config /run/kubeadm/kubeadm.yaml  && echo success > /run/cluster-api/bootstrap-success.complete"}
	if !reflect.DeepEqual(r.ran, want) {
		t.Errorf("ran %q", r.ran)
	}
	o := outcomes(rep)
	if o["users[0]"] != Skipped || o["ntp"] != Skipped || o["bootstrap-success"] != AlreadyDone {
		t.Errorf("outcomes %v", o)
	}
	// No temporary files left behind by the atomic writes.
	for p := range snapshot(t, root) {
		if strings.Contains(p, ".tmp-") {
			t.Errorf("leftover %s", p)
		}
	}
}

func TestApplyIdempotent(t *testing.T) {
	root := t.TempDir()
	steps := planFile(t, "testdata/kubeadm-worker-join.yaml", root)
	r := &fakeRunner{root: root}
	rep1, err := Apply(context.Background(), steps, r)
	if err != nil || !rep1.Complete {
		t.Fatalf("first apply: %v\n%s", err, rep1)
	}
	first := snapshot(t, root)
	ran := len(r.ran)

	// Plan again from scratch, as a restarted node agent would.
	steps = planFile(t, "testdata/kubeadm-worker-join.yaml", root)
	rep2, err := Apply(context.Background(), steps, r)
	if err != nil || !rep2.Complete {
		t.Fatalf("second apply: %v\n%s", err, rep2)
	}
	if second := snapshot(t, root); !reflect.DeepEqual(first, second) {
		t.Errorf("files changed on re-apply:\n%v\n%v", first, second)
	}
	hosts, _ := os.ReadFile(filepath.Join(root, "etc/hosts"))
	if string(hosts) != "127.0.0.1 m-0\n" {
		t.Errorf("append repeated: %q", hosts)
	}
	// swapoff was skipped, so it is asked again; nothing else re-ran.
	if again := r.ran[ran:]; !reflect.DeepEqual(again, []string{"swapoff -a"}) {
		t.Errorf("re-ran %q", again)
	}
	for _, e := range rep2.Entries {
		switch e.Step.(type) {
		case WriteFile, RunCommand, MarkComplete:
			if e.Source == "runcmd[0]" {
				if e.Outcome != Skipped || !strings.Contains(e.Detail, "no swap") {
					t.Errorf("%s: %s %s", e.Source, e.Outcome, e.Detail)
				}
				continue
			}
			if e.Outcome != AlreadyDone {
				t.Errorf("%s: %s, want already-done", e.Source, e.Outcome)
			}
		case Unsupported, CreateUser, ConfigureNTP:
			if e.Outcome != Skipped || e.Detail == "" {
				t.Errorf("%s: %s %q", e.Source, e.Outcome, e.Detail)
			}
		}
	}
	if rep2.Count(Done) != 0 {
		t.Errorf("second apply did work:\n%s", rep2)
	}
}

func TestApplyRewritesChangedFile(t *testing.T) {
	root := t.TempDir()
	steps := planFile(t, "testdata/minimal.yaml", root)
	steps = append([]Step{WriteFile{Source: "write_files[0]", Target: "/etc/x", Root: root, Path: filepath.Join(root, "etc/x"), Content: []byte("a"), Mode: 0o600}}, steps...)
	if _, err := Apply(context.Background(), steps, &fakeRunner{root: root}); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(root, "etc/x")
	if err := os.WriteFile(p, []byte("tampered"), 0o666); err != nil {
		t.Fatal(err)
	}
	rep, err := Apply(context.Background(), steps, &fakeRunner{root: root})
	if err != nil || rep.Entries[0].Outcome != Done {
		t.Fatalf("%v\n%s", err, rep)
	}
	b, _ := os.ReadFile(p)
	info, _ := os.Stat(p)
	if string(b) != "a" || info.Mode().Perm() != 0o600 {
		t.Errorf("%q %v", b, info.Mode())
	}
}

func TestApplyFailureStopsAndNoSentinel(t *testing.T) {
	root := t.TempDir()
	doc := "#cloud-config\nwrite_files:\n- {path: /a, content: x}\nruncmd:\n- echo one\n- false-command\n- echo three\n"
	steps, err := Plan(mustParse(t, doc), Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	r := &fakeRunner{root: root, fail: "false-command"}
	rep, err := Apply(context.Background(), steps, r)
	if err == nil || !strings.Contains(err.Error(), "runcmd[1]") {
		t.Fatalf("want runcmd[1] error, got %v", err)
	}
	if rep.Complete {
		t.Error("complete after a failure")
	}
	if _, err := os.Stat(filepath.Join(root, SentinelPath)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("sentinel written: %v", err)
	}
	want := map[string]Outcome{"write_files[0]": Done, "runcmd[0]": Done, "runcmd[1]": Failed, "runcmd[2]": NotRun, "bootstrap-success": NotRun}
	if got := outcomes(rep); !reflect.DeepEqual(got, want) {
		t.Errorf("outcomes %v", got)
	}
	// Fix the command and re-apply: completed steps are not repeated.
	r.fail, r.ran = "", nil
	rep, err = Apply(context.Background(), steps, r)
	if err != nil || !rep.Complete {
		t.Fatalf("%v\n%s", err, rep)
	}
	if !reflect.DeepEqual(r.ran, []string{"false-command", "echo three"}) {
		t.Errorf("ran %q", r.ran)
	}
	if b, _ := os.ReadFile(filepath.Join(root, SentinelPath)); string(b) != "success\n" {
		t.Errorf("sentinel %q", b)
	}
}

func TestApplyRefusesSymlinkEscape(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	if err := os.Symlink(outside, filepath.Join(root, "etc")); err != nil {
		t.Fatal(err)
	}
	steps, err := Plan(mustParse(t, "#cloud-config\nwrite_files:\n- {path: /etc/passwd, content: pwned}\n"), Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Apply(context.Background(), steps, nil)
	if err == nil || !strings.Contains(err.Error(), "outside the machine root") {
		t.Fatalf("want refusal, got %v\n%s", err, rep)
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Errorf("wrote outside the root: %v", entries)
	}
	// A hand-built step whose path is outside its root is refused too.
	bad := []Step{WriteFile{Source: "x", Root: root, Path: filepath.Join(outside, "f"), Content: []byte("x")}}
	if _, err := Apply(context.Background(), bad, nil); err == nil {
		t.Error("hand-built escape accepted")
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Errorf("wrote outside the root: %v", entries)
	}
	// A symlink as the file itself is not written through.
	root2 := t.TempDir()
	os.MkdirAll(filepath.Join(root2, "etc"), 0o755)
	if err := os.Symlink(filepath.Join(outside, "target"), filepath.Join(root2, "etc/passwd")); err != nil {
		t.Fatal(err)
	}
	steps, _ = Plan(mustParse(t, "#cloud-config\nwrite_files:\n- {path: /etc/passwd, content: pwned, append: true}\n"), Options{Root: root2})
	if _, err := Apply(context.Background(), steps, nil); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("symlink file: %v", err)
	}
}

func TestApplyUsersAndNTPWithCapableRunner(t *testing.T) {
	root := t.TempDir()
	steps := planFile(t, "testdata/kubeadm-worker-join.yaml", root)
	r := &fullRunner{fakeRunner: fakeRunner{root: root}}
	rep, err := Apply(context.Background(), steps, r)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(r.users, []string{"default", "ops"}) || !reflect.DeepEqual(r.ntp, []string{"time.example.com"}) {
		t.Errorf("users %v ntp %v", r.users, r.ntp)
	}
	rep, _ = Apply(context.Background(), steps, r)
	if len(r.users) != 2 || outcomes(rep)["users[1]"] != AlreadyDone {
		t.Errorf("users re-created:\n%s", rep)
	}
}

func TestApplyNilRunnerAndCancel(t *testing.T) {
	root := t.TempDir()
	steps := planFile(t, "testdata/minimal.yaml", root)
	rep, err := Apply(context.Background(), steps, nil)
	if err != nil || outcomes(rep)["runcmd[0]"] != Skipped || !rep.Complete {
		t.Fatalf("%v\n%s", err, rep)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	root = t.TempDir()
	rep, err = Apply(ctx, planFile(t, "testdata/minimal.yaml", root), nil)
	if !errors.Is(err, context.Canceled) || rep.Complete || rep.Count(NotRun) != 2 {
		t.Fatalf("%v\n%s", err, rep)
	}
}

func TestReportJSONOmitsContents(t *testing.T) {
	root := t.TempDir()
	rep, err := Apply(context.Background(), planFile(t, "testdata/kubeadm-controlplane.yaml", root), &fakeRunner{root: root})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "PRIVATE KEY") || strings.Contains(string(b), "TUlJRWZha2VLZXlG") {
		t.Errorf("report leaks file contents: %s", b)
	}
	if !strings.Contains(string(b), `"Action":"write /etc/kubernetes/pki/ca.key`) {
		t.Errorf("report lacks actions: %s", b)
	}
	j, _ := os.ReadFile(filepath.Join(root, JournalPath))
	if strings.Contains(string(j), "PRIVATE KEY") {
		t.Errorf("journal leaks contents: %s", j)
	}
}
