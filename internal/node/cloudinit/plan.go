package cloudinit

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// SentinelPath is the file Cluster API's bootstrap convention uses to say a
// machine finished bootstrapping; Apply writes it (under the machine root)
// only when every step succeeded or was deliberately skipped.
const SentinelPath = "/run/cluster-api/bootstrap-success.complete"

// JournalPath is where, under the machine root, Apply records the steps it
// completed, so applying a plan again does not repeat them.
const JournalPath = "/var/lib/cloud/instance/capstan-applied.json"

// Options tell the planner about the machine.
type Options struct {
	// Root is the machine's own directory; every file path in the document
	// is re-rooted under it. Required, absolute.
	Root string
	// Hostname, when set, provides the values of the instance-data variables
	// Cluster API templates use: ds.meta_data.hostname,
	// ds.meta_data.local_hostname and v1.local_hostname.
	Hostname string
	// TemplateVars adds or overrides variables for "## template: jinja"
	// documents (keys such as "ds.meta_data.hostname").
	TemplateVars map[string]string
}

// Step is one action of a plan. The concrete types are WriteFile,
// RunCommand, CreateUser, ConfigureNTP, Unsupported and MarkComplete.
type Step interface {
	// Origin is where in the document the step came from, e.g.
	// "write_files[2]" or "runcmd[0]".
	Origin() string
	// Describe is a one-line human description.
	Describe() string
	isStep()
}

// WriteFile writes (or appends to) one file under the machine root.
type WriteFile struct {
	Source string
	// Target is the path the document named, inside the machine.
	Target string
	// Root is the machine root and Path the host path, Root joined with Target.
	Root    string
	Path    string
	Content []byte
	Mode    fs.FileMode
	Owner   string `json:",omitempty"`
	Append  bool   `json:",omitempty"`
}

// RunCommand runs one bootcmd or runcmd entry through the Runner.
type RunCommand struct {
	Source string
	// Stage is "bootcmd" or "runcmd".
	Stage string
	// Exactly one of Argv (run directly) and Shell (run by /bin/sh -c) is set.
	Argv  []string `json:",omitempty"`
	Shell string   `json:",omitempty"`
}

// CreateUser asks for a user account.
type CreateUser struct {
	Source string
	User   User
}

// ConfigureNTP asks for time synchronisation.
type ConfigureNTP struct {
	Source  string
	Servers []string `json:",omitempty"`
	Pools   []string `json:",omitempty"`
	Client  string   `json:",omitempty"`
}

// Unsupported records something in the document a local machine does not
// do, and why; Apply reports it as skipped.
type Unsupported struct {
	Source string
	What   string
	Why    string
}

// MarkComplete is always the last step of a plan: it writes the bootstrap
// success sentinel and names the journal Apply keeps.
type MarkComplete struct {
	Root string
	// Path is the host path of the sentinel (Root + SentinelPath).
	Path string
	// Journal is the host path of the journal (Root + JournalPath).
	Journal string
}

func (s WriteFile) Origin() string    { return s.Source }
func (s RunCommand) Origin() string   { return s.Source }
func (s CreateUser) Origin() string   { return s.Source }
func (s ConfigureNTP) Origin() string { return s.Source }
func (s Unsupported) Origin() string  { return s.Source }
func (s MarkComplete) Origin() string { return "bootstrap-success" }

func (WriteFile) isStep()    {}
func (RunCommand) isStep()   {}
func (CreateUser) isStep()   {}
func (ConfigureNTP) isStep() {}
func (Unsupported) isStep()  {}
func (MarkComplete) isStep() {}

func (s WriteFile) Describe() string {
	verb := "write"
	if s.Append {
		verb = "append to"
	}
	return fmt.Sprintf("%s %s (%d bytes, mode %#o)", verb, s.Target, len(s.Content), uint32(s.Mode.Perm()))
}

// Command returns the command in the form it was written.
func (s RunCommand) Command() Command { return Command{Argv: s.Argv, Shell: s.Shell} }

func (s RunCommand) Describe() string { return "run " + s.Command().String() }

func (s CreateUser) Describe() string {
	if s.User.Default {
		return "create the default user"
	}
	return "create user " + s.User.Name
}

func (s ConfigureNTP) Describe() string {
	all := append(append([]string{}, s.Servers...), s.Pools...)
	if len(all) == 0 {
		return "enable NTP with the default servers"
	}
	return "use NTP servers " + strings.Join(all, ", ")
}

func (s Unsupported) Describe() string { return s.What + ": " + s.Why }

func (s MarkComplete) Describe() string {
	return "write the bootstrap success sentinel " + SentinelPath
}

// Plan turns a parsed document into the ordered steps a machine takes,
// following cloud-init's module order: bootcmd; write_files; disk_setup,
// fs_setup and mounts (reported as unsupported); users; ntp; deferred
// write_files; runcmd; then the ignored top-level keys and the ignored keys
// of write_files, users and ntp entries (reported as Unsupported), and
// finally MarkComplete. Plan is pure: it reads and writes nothing.
func Plan(cfg *Config, opts Options) ([]Step, error) {
	if cfg == nil {
		return nil, fmt.Errorf("cloudinit: nil config")
	}
	if opts.Root == "" || !filepath.IsAbs(opts.Root) {
		return nil, fmt.Errorf("cloudinit: Options.Root must be an absolute directory, got %q", opts.Root)
	}
	root := filepath.Clean(opts.Root)
	t := newTemplater(cfg.Template == "jinja", opts)

	var steps []Step
	var errs []error
	cmd := func(stage string, i int, c Command) {
		src := fmt.Sprintf("%s[%d]", stage, i)
		rc := RunCommand{Source: src, Stage: stage}
		if c.Argv != nil {
			rc.Argv = make([]string, len(c.Argv))
			for j, a := range c.Argv {
				rc.Argv[j] = t.expand(&errs, fmt.Sprintf("%s[%d]", src, j), a)
			}
		} else {
			rc.Shell = t.expand(&errs, src, c.Shell)
		}
		steps = append(steps, rc)
	}
	file := func(i int, f File) {
		src := fmt.Sprintf("write_files[%d]", i)
		target := t.expand(&errs, src+".path", f.Path)
		if err := checkMachinePath(target); err != nil {
			errs = append(errs, &FieldError{Field: src + ".path", Msg: err.Error()})
			return
		}
		target = filepath.Clean(target)
		content, err := decodeContent(f.Content, f.Encoding)
		if err != nil {
			errs = append(errs, &FieldError{Field: src + ".content", Msg: err.Error()})
			return
		}
		if f.Encoding == EncodingPlain {
			content = []byte(t.expand(&errs, src+".content", string(content)))
		}
		steps = append(steps, WriteFile{
			Source: src, Target: target, Root: root, Path: filepath.Join(root, target),
			Content: content, Mode: f.Mode, Owner: f.Owner, Append: f.Append,
		})
	}

	for i, c := range cfg.BootCmd {
		cmd("bootcmd", i, c)
	}
	for i, f := range cfg.WriteFiles {
		if !f.Defer {
			file(i, f)
		}
	}
	for _, d := range cfg.DiskSetup {
		steps = append(steps, Unsupported{Source: "disk_setup." + d.Device, What: "partition " + d.Device,
			Why: "a local machine has no disks of its own; its files live in the machine directory"})
	}
	for i, f := range cfg.FSSetup {
		what := "make a filesystem"
		if f.Filesystem != "" {
			what = "make a " + f.Filesystem + " filesystem"
		}
		if f.Device != "" {
			what += " on " + f.Device
		}
		steps = append(steps, Unsupported{Source: fmt.Sprintf("fs_setup[%d]", i), What: what,
			Why: "a local machine has no block devices to format"})
	}
	for i, m := range cfg.Mounts {
		steps = append(steps, Unsupported{Source: fmt.Sprintf("mounts[%d]", i), What: "mount " + strings.Join(m.Fields, " "),
			Why: "a local machine does not mount filesystems; it shares the host's"})
	}
	for i, u := range cfg.Users {
		steps = append(steps, CreateUser{Source: fmt.Sprintf("users[%d]", i), User: u})
	}
	if cfg.NTP != nil && cfg.NTP.Enabled {
		steps = append(steps, ConfigureNTP{Source: "ntp", Servers: cfg.NTP.Servers, Pools: cfg.NTP.Pools, Client: cfg.NTP.Client})
	}
	for i, f := range cfg.WriteFiles {
		if f.Defer {
			file(i, f)
		}
	}
	for i, c := range cfg.RunCmd {
		cmd("runcmd", i, c)
	}
	ignored := append([]string(nil), cfg.Ignored...)
	sort.Strings(ignored)
	for _, k := range ignored {
		steps = append(steps, Unsupported{Source: k, What: "cloud-config key " + k,
			Why: "not interpreted by Capstan's cloud-init; ignored"})
	}
	ignoredField := func(src string, keys []string) {
		for _, k := range keys {
			steps = append(steps, Unsupported{Source: src + "." + k, What: "key " + k + " of " + src,
				Why: "not interpreted by Capstan's cloud-init; ignored"})
		}
	}
	for i, f := range cfg.WriteFiles {
		ignoredField(fmt.Sprintf("write_files[%d]", i), f.Ignored)
	}
	for i, u := range cfg.Users {
		ignoredField(fmt.Sprintf("users[%d]", i), u.Ignored)
	}
	if cfg.NTP != nil {
		ignoredField("ntp", cfg.NTP.Ignored)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	steps = append(steps, MarkComplete{
		Root:    root,
		Path:    filepath.Join(root, SentinelPath),
		Journal: filepath.Join(root, JournalPath),
	})
	return steps, nil
}

// templater expands {{ variable }} references of jinja documents.
type templater struct {
	on   bool
	vars map[string]string
}

var jinjaVar = regexp.MustCompile(`\{\{\s*([^{}]*?)\s*\}\}`)

func newTemplater(on bool, opts Options) *templater {
	t := &templater{on: on, vars: map[string]string{}}
	if opts.Hostname != "" {
		for _, k := range []string{"ds.meta_data.hostname", "ds.meta_data.local_hostname", "v1.local_hostname"} {
			t.vars[k] = opts.Hostname
		}
	}
	for k, v := range opts.TemplateVars {
		t.vars[k] = v
	}
	return t
}

func (t *templater) expand(errs *[]error, field, s string) string {
	if !t.on || !strings.Contains(s, "{{") {
		return s
	}
	return jinjaVar.ReplaceAllStringFunc(s, func(m string) string {
		name := jinjaVar.FindStringSubmatch(m)[1]
		v, ok := t.vars[name]
		if !ok {
			*errs = append(*errs, &FieldError{Field: field, Msg: fmt.Sprintf("template variable %q has no value (set Options.Hostname or Options.TemplateVars)", name)})
			return m
		}
		return v
	})
}
