package cloudinit

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"capstan.dev/capstan/internal/atomicfile"
)

// Runner runs the commands of a plan. The node agent implements it: it
// performs the commands it knows (kubeadm init / join and the like) and
// returns an error wrapping ErrUnsupported, saying why, for the ones it
// cannot run on a local machine; those are reported as skipped, not failed.
type Runner interface {
	Run(ctx context.Context, cmd RunCommand) error
}

// RunnerFunc adapts a function to Runner.
type RunnerFunc func(ctx context.Context, cmd RunCommand) error

// Run calls f.
func (f RunnerFunc) Run(ctx context.Context, cmd RunCommand) error { return f(ctx, cmd) }

// UserCreator may be implemented by a Runner that can create user accounts;
// otherwise CreateUser steps are skipped.
type UserCreator interface {
	CreateUser(ctx context.Context, step CreateUser) error
}

// NTPConfigurer may be implemented by a Runner that can configure time
// synchronisation; otherwise ConfigureNTP steps are skipped.
type NTPConfigurer interface {
	ConfigureNTP(ctx context.Context, step ConfigureNTP) error
}

// ErrUnsupported marks a step a machine deliberately does not perform.
var ErrUnsupported = errors.New("not supported on this machine")

// NotSupported returns an error wrapping ErrUnsupported with the reason.
func NotSupported(reason string) error { return fmt.Errorf("%w: %s", ErrUnsupported, reason) }

// Outcome is what became of one step.
type Outcome string

// Outcomes.
const (
	// Done: the step was performed by this Apply.
	Done Outcome = "done"
	// AlreadyDone: an earlier Apply performed it (or the file on disk already
	// has the content and mode), so nothing was repeated.
	AlreadyDone Outcome = "already-done"
	// Skipped: the machine does not perform it; Detail says why.
	Skipped Outcome = "skipped"
	// Failed: the step was attempted and failed; Err says how.
	Failed Outcome = "failed"
	// NotRun: an earlier step failed or the context ended first.
	NotRun Outcome = "not-run"
)

// Entry reports one step.
type Entry struct {
	Source string
	// Action is Step.Describe(). Step itself is not serialised: a WriteFile
	// carries file contents, private keys among them.
	Action  string
	Step    Step `json:"-"`
	Outcome Outcome
	Detail  string `json:",omitempty"`
	Err     error  `json:"-"`
}

// Report is what Apply did.
type Report struct {
	Entries []Entry
	// Complete is true when every step succeeded (or was skipped) and the
	// bootstrap success sentinel is in place.
	Complete bool
	// Sentinel is the host path of the sentinel when Complete.
	Sentinel string
}

// Count returns how many entries had the outcome.
func (r Report) Count(o Outcome) int {
	n := 0
	for _, e := range r.Entries {
		if e.Outcome == o {
			n++
		}
	}
	return n
}

// String renders the report one step per line, for a machine's log.
func (r Report) String() string {
	var b strings.Builder
	for _, e := range r.Entries {
		desc := e.Action
		fmt.Fprintf(&b, "%-12s %-22s %s", e.Outcome, e.Source, desc)
		if e.Detail != "" && !strings.Contains(desc, e.Detail) {
			fmt.Fprintf(&b, " (%s)", e.Detail)
		}
		b.WriteByte('\n')
	}
	if r.Complete {
		b.WriteString("bootstrap complete\n")
	} else {
		b.WriteString("bootstrap not complete\n")
	}
	return b.String()
}

// Apply performs the steps in order and reports each. Files are written
// atomically (a temporary file renamed into place) with their modes, and
// never outside their machine root. Apply stops at the first failing step;
// the rest are reported NotRun. It is idempotent: the plan's MarkComplete step
// names a journal of completed steps, so a second Apply reports
// already-done steps instead of repeating commands or appends, and rewrites
// no file whose content and mode already match. The bootstrap success
// sentinel is written only when every earlier step succeeded or was skipped.
// A nil runner skips every command.
func Apply(ctx context.Context, steps []Step, runner Runner) (Report, error) {
	var rep Report
	var jr *journal
	for _, s := range steps {
		if mc, ok := s.(MarkComplete); ok {
			j, err := loadJournal(mc.Root, mc.Journal)
			if err != nil {
				return rep, err
			}
			jr = j
		}
	}
	var firstErr error
	for _, s := range steps {
		e := Entry{Source: s.Origin(), Action: s.Describe(), Step: s}
		switch {
		case firstErr != nil:
			e.Outcome, e.Detail = NotRun, "an earlier step failed"
		case ctx.Err() != nil:
			e.Outcome, e.Detail, e.Err = NotRun, "stopped: "+ctx.Err().Error(), ctx.Err()
			firstErr = ctx.Err()
		default:
			e.Outcome, e.Detail, e.Err = apply(ctx, s, runner, jr)
			if e.Outcome == Failed {
				firstErr = fmt.Errorf("cloudinit: %s: %w", e.Source, e.Err)
			}
			if e.Outcome == Done && jr != nil {
				if err := jr.mark(s); err != nil && firstErr == nil {
					e.Outcome, e.Err, e.Detail = Failed, err, "could not record the step in the journal"
					firstErr = fmt.Errorf("cloudinit: %s: %w", e.Source, err)
				}
			}
			if mc, ok := s.(MarkComplete); ok && (e.Outcome == Done || e.Outcome == AlreadyDone) {
				rep.Complete, rep.Sentinel = true, mc.Path
			}
		}
		rep.Entries = append(rep.Entries, e)
	}
	return rep, firstErr
}

func apply(ctx context.Context, s Step, runner Runner, jr *journal) (Outcome, string, error) {
	switch st := s.(type) {
	case WriteFile:
		if st.Append && jr.done(st) {
			return AlreadyDone, "", nil
		}
		return writeFile(st)
	case RunCommand:
		if jr.done(st) {
			return AlreadyDone, "", nil
		}
		if runner == nil {
			return Skipped, "no command runner on this machine", nil
		}
		return runnerOutcome(runner.Run(ctx, st))
	case CreateUser:
		uc, ok := runner.(UserCreator)
		if !ok {
			return Skipped, "a local machine runs as the node agent's user; user accounts are recorded, not created", nil
		}
		if jr.done(st) {
			return AlreadyDone, "", nil
		}
		return runnerOutcome(uc.CreateUser(ctx, st))
	case ConfigureNTP:
		nc, ok := runner.(NTPConfigurer)
		if !ok {
			return Skipped, "a local machine keeps the host's clock; NTP servers are recorded, not configured", nil
		}
		if jr.done(st) {
			return AlreadyDone, "", nil
		}
		return runnerOutcome(nc.ConfigureNTP(ctx, st))
	case Unsupported:
		return Skipped, st.Why, nil
	case MarkComplete:
		return writeFile(WriteFile{Source: st.Origin(), Target: SentinelPath, Root: st.Root, Path: st.Path,
			Content: []byte("success\n"), Mode: 0o644})
	}
	return Failed, "", fmt.Errorf("unknown step type %T", s)
}

func runnerOutcome(err error) (Outcome, string, error) {
	switch {
	case err == nil:
		return Done, "", nil
	case errors.Is(err, ErrUnsupported):
		return Skipped, err.Error(), nil
	default:
		return Failed, err.Error(), err
	}
}

// within reports whether path is root or below it, lexically.
func within(root, path string) bool {
	rel, err := filepath.Rel(root, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// safeParent creates the parent directory of path and checks that, with
// symbolic links resolved, it is still inside root.
func safeParent(root, path string) (string, error) {
	if root == "" || !filepath.IsAbs(root) || !filepath.IsAbs(path) {
		return "", fmt.Errorf("refusing %q: root %q and path must be absolute", path, root)
	}
	root, path = filepath.Clean(root), filepath.Clean(path)
	if !within(root, path) || path == root {
		return "", fmt.Errorf("refusing to write %q: outside the machine root %q", path, root)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return "", err
	}
	realDir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", err
	}
	if !within(realRoot, realDir) {
		return "", fmt.Errorf("refusing to write %q: %s resolves to %s, outside the machine root", path, dir, realDir)
	}
	return dir, nil
}

func writeFile(st WriteFile) (Outcome, string, error) {
	if _, err := safeParent(st.Root, st.Path); err != nil {
		return Failed, "", err
	}
	var existing []byte
	info, err := os.Lstat(st.Path)
	switch {
	case err == nil && !info.Mode().IsRegular():
		err = fmt.Errorf("refusing to write %s: it exists and is not a regular file (%s)", st.Target, info.Mode().Type())
		return Failed, "", err
	case err == nil:
		if existing, err = os.ReadFile(st.Path); err != nil {
			return Failed, "", err
		}
	case !errors.Is(err, fs.ErrNotExist):
		return Failed, "", err
	}
	content := st.Content
	if st.Append {
		content = append(append([]byte{}, existing...), st.Content...)
	} else if info != nil && bytes.Equal(existing, content) && fileMode(info) == st.Mode {
		return AlreadyDone, "", nil
	}
	if err := atomicfile.WriteFile(st.Path, content, st.Mode); err != nil {
		return Failed, "", err
	}
	return Done, "", nil
}

func fileMode(info fs.FileInfo) fs.FileMode {
	return info.Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)
}

// journal records the keys of completed steps in a JSON file under the root.
type journal struct {
	root, path string
	Done       map[string]string `json:"done"`
}

func loadJournal(root, path string) (*journal, error) {
	j := &journal{root: root, path: path, Done: map[string]string{}}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return j, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cloudinit: reading journal: %w", err)
	}
	if err := json.Unmarshal(b, j); err != nil {
		return nil, fmt.Errorf("cloudinit: journal %s is corrupt: %w", path, err)
	}
	if j.Done == nil {
		j.Done = map[string]string{}
	}
	return j, nil
}

// stepKey identifies a step by where it came from and what it does, so a
// changed document re-runs the steps that changed.
func stepKey(s Step) string {
	b, _ := json.Marshal(struct {
		T string
		S Step
	}{fmt.Sprintf("%T", s), s})
	sum := sha256.Sum256(b)
	return s.Origin() + "@" + hex.EncodeToString(sum[:12])
}

func (j *journal) done(s Step) bool {
	if j == nil {
		return false
	}
	_, ok := j.Done[stepKey(s)]
	return ok
}

func (j *journal) mark(s Step) error {
	if _, ok := s.(MarkComplete); ok {
		return nil
	}
	j.Done[stepKey(s)] = s.Describe()
	b, err := json.MarshalIndent(j, "", "  ")
	if err != nil {
		return err
	}
	if _, err := safeParent(j.root, j.path); err != nil {
		return err
	}
	return atomicfile.WriteFile(j.path, append(b, '\n'), 0o600)
}
