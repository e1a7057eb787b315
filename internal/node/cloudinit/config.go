package cloudinit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	pathpkg "path"
	"sort"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"
)

// Header is the first line every cloud-config document starts with.
const Header = "#cloud-config"

// jinjaHeader may precede Header; Cluster API's kubeadm bootstrap provider
// emits it so that {{ ds.meta_data.hostname }} and friends are expanded.
const jinjaHeader = "## template: jinja"

// DefaultFileMode is the mode cloud-init gives a written file whose
// permissions are not set.
const DefaultFileMode fs.FileMode = 0o644

// Config is a parsed cloud-config document, restricted to the modules a
// Capstan machine understands. Everything else is listed in Ignored.
type Config struct {
	// Template is "jinja" when the document opened with "## template: jinja".
	Template string

	BootCmd    []Command
	WriteFiles []File
	Users      []User
	// NTP is nil when the document has no ntp section.
	NTP    *NTP
	RunCmd []Command

	// Disk and filesystem set-up are parsed so they can be reported, but a
	// local machine has no disks of its own to partition or mount.
	DiskSetup []DiskSetup
	FSSetup   []FSSetup
	Mounts    []Mount

	// Ignored lists, sorted, the top-level keys this package does not
	// interpret. They are reported, never acted on.
	Ignored []string
}

// Command is one bootcmd or runcmd entry: either an argument vector (the
// YAML list form, run without a shell) or a shell string.
type Command struct {
	Argv  []string `json:"argv,omitempty"`
	Shell string   `json:"shell,omitempty"`
}

// String renders the command for logs.
func (c Command) String() string {
	if c.Argv != nil {
		q := make([]string, len(c.Argv))
		for i, a := range c.Argv {
			q[i] = ShellQuote(a)
		}
		return strings.Join(q, " ")
	}
	return c.Shell
}

// Encoding is the canonical form of a write_files encoding.
type Encoding string

// The encodings cloud-init accepts, each alias folded onto one of these.
const (
	EncodingPlain      Encoding = ""            // "", "plain", "text/plain"
	EncodingBase64     Encoding = "base64"      // "b64", "base64"
	EncodingGzip       Encoding = "gzip"        // "gz", "gzip"
	EncodingGzipBase64 Encoding = "gzip+base64" // "gz+b64", "gz+base64", "gzip+b64", "gzip+base64"
)

// File is one write_files entry.
type File struct {
	// Path is the absolute path inside the machine.
	Path string
	// Content is the content as written in the document (still encoded).
	Content  string
	Encoding Encoding
	// Owner is recorded ("user:group") but a local machine does not chown.
	Owner string
	// Mode is the permissions, DefaultFileMode when none were given.
	Mode   fs.FileMode
	Append bool
	// Defer asks for the file to be written late, just before runcmd.
	Defer bool
	// Ignored lists the entry's keys this package does not interpret.
	Ignored []string
}

// User is one users entry.
type User struct {
	Name string
	// Default is the "default" entry: the image's default user.
	Default           bool
	Gecos             string   `json:",omitempty"`
	HomeDir           string   `json:",omitempty"`
	PrimaryGroup      string   `json:",omitempty"`
	Groups            []string `json:",omitempty"`
	Shell             string   `json:",omitempty"`
	Sudo              []string `json:",omitempty"`
	SSHAuthorizedKeys []string `json:",omitempty"`
	// LockPasswd defaults to true, as in cloud-init.
	LockPasswd      bool
	Passwd          string   `json:",omitempty"`
	HashedPasswd    string   `json:",omitempty"`
	PlainTextPasswd string   `json:",omitempty"`
	System          bool     `json:",omitempty"`
	NoCreateHome    bool     `json:",omitempty"`
	NoUserGroup     bool     `json:",omitempty"`
	UID             string   `json:",omitempty"`
	Ignored         []string `json:",omitempty"`
}

// NTP is the ntp section.
type NTP struct {
	// Enabled defaults to true when the section is present.
	Enabled bool
	Servers []string
	Pools   []string
	Client  string
	Ignored []string
}

// DiskSetup is one disk_setup device.
type DiskSetup struct {
	Device    string
	TableType string
	Layout    string // "true", "false" or the partition list as written
	Overwrite bool
}

// FSSetup is one fs_setup entry.
type FSSetup struct {
	Label      string
	Filesystem string
	Device     string
	Partition  string
}

// Mount is one mounts entry: the fstab fields as written.
type Mount struct {
	Fields []string
}

// FieldError is a problem with one field of the document.
type FieldError struct {
	Field string // e.g. "write_files[2].permissions"
	Msg   string
}

func (e *FieldError) Error() string {
	if e.Field == "" {
		return e.Msg
	}
	return e.Field + ": " + e.Msg
}

// parser accumulates field errors while walking the decoded document.
type parser struct{ errs []error }

func (p *parser) fail(field, format string, args ...any) {
	p.errs = append(p.errs, &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)})
}

// Parse reads a cloud-config document. It requires the "#cloud-config"
// header (optionally preceded by "## template: jinja"), checks every field it
// interprets and reports each problem naming the field. Unknown top-level keys
// are recorded in Config.Ignored. All problems found are returned together.
func Parse(data []byte) (*Config, error) {
	cfg := &Config{}
	body, tmpl, err := splitHeader(data)
	if err != nil {
		return nil, err
	}
	cfg.Template = tmpl
	if bytes.Contains(body, []byte("!!binary")) {
		return nil, &FieldError{Msg: `YAML "!!binary" values are not supported; give the content as text with "encoding: b64"`}
	}
	js, err := yaml.YAMLToJSON(body)
	if err != nil {
		return nil, fmt.Errorf("cloud-config is not valid YAML: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("cloud-config is not valid YAML: %w", err)
	}
	if doc == nil {
		return cfg, nil
	}
	top, ok := doc.(map[string]any)
	if !ok {
		return nil, &FieldError{Msg: fmt.Sprintf("cloud-config must be a mapping, not %s", kind(doc))}
	}
	p := &parser{}
	for _, k := range sortedKeys(top) {
		v := top[k]
		switch k {
		case "bootcmd":
			cfg.BootCmd = p.commands(k, v)
		case "runcmd":
			cfg.RunCmd = p.commands(k, v)
		case "write_files":
			for i, e := range p.list(k, v) {
				if f, ok := p.file(fmt.Sprintf("%s[%d]", k, i), e); ok {
					cfg.WriteFiles = append(cfg.WriteFiles, f)
				}
			}
		case "users":
			cfg.Users = p.users(k, v)
		case "ntp":
			cfg.NTP = p.ntp(k, v)
		case "disk_setup":
			cfg.DiskSetup = p.diskSetup(k, v)
		case "fs_setup":
			for i, e := range p.list(k, v) {
				cfg.FSSetup = append(cfg.FSSetup, p.fsSetup(fmt.Sprintf("%s[%d]", k, i), e))
			}
		case "mounts":
			for i, e := range p.list(k, v) {
				cfg.Mounts = append(cfg.Mounts, Mount{Fields: p.scalarList(fmt.Sprintf("%s[%d]", k, i), e, false)})
			}
		default:
			cfg.Ignored = append(cfg.Ignored, k)
		}
	}
	if len(p.errs) > 0 {
		return nil, errors.Join(p.errs...)
	}
	return cfg, nil
}

func splitHeader(data []byte) (body []byte, template string, err error) {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	line, rest := cutLine(data)
	if strings.EqualFold(strings.Join(strings.Fields(string(line)), " "), jinjaHeader) {
		template = "jinja"
		line, rest = cutLine(rest)
	}
	if strings.TrimRight(string(line), " \t\r") != Header {
		first := string(line)
		if len(first) > 40 {
			first = first[:40] + "..."
		}
		if len(bytes.TrimSpace(data)) == 0 {
			return nil, "", &FieldError{Msg: "bootstrap data is empty"}
		}
		return nil, "", &FieldError{Msg: fmt.Sprintf("bootstrap data is not cloud-config: first line is %q, want %q", first, Header)}
	}
	return rest, template, nil
}

func cutLine(b []byte) (line, rest []byte) {
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		return bytes.TrimSuffix(b[:i], []byte("\r")), b[i+1:]
	}
	return b, nil
}

func (p *parser) list(field string, v any) []any {
	switch t := v.(type) {
	case nil:
		return nil
	case []any:
		return t
	default:
		p.fail(field, "must be a list, not %s", kind(v))
		return nil
	}
}

func (p *parser) mapping(field string, v any) (map[string]any, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		p.fail(field, "must be a mapping, not %s", kind(v))
	}
	return m, ok
}

// scalar renders a YAML scalar as cloud-init would see it as a string.
func scalar(v any) (string, bool) {
	switch t := v.(type) {
	case string:
		return t, true
	case json.Number:
		return t.String(), true
	case bool:
		return strconv.FormatBool(t), true
	}
	return "", false
}

func (p *parser) str(field string, v any) string {
	if v == nil {
		return ""
	}
	s, ok := v.(string)
	if !ok {
		if n, isNum := v.(json.Number); isNum {
			return n.String()
		}
		p.fail(field, "must be a string, not %s", kind(v))
	}
	return s
}

func (p *parser) boolean(field string, v any, def bool) bool {
	switch t := v.(type) {
	case nil:
		return def
	case bool:
		return t
	case string:
		switch strings.ToLower(t) {
		case "true", "yes", "on":
			return true
		case "false", "no", "off":
			return false
		}
	}
	p.fail(field, "must be true or false, not %s", describe(v))
	return def
}

// scalarList accepts a list of scalars; with commaString, also a single
// comma-separated string.
func (p *parser) scalarList(field string, v any, commaString bool) []string {
	if s, ok := v.(string); ok && commaString {
		var out []string
		for _, part := range strings.Split(s, ",") {
			if part = strings.TrimSpace(part); part != "" {
				out = append(out, part)
			}
		}
		return out
	}
	var out []string
	for i, e := range p.list(field, v) {
		s, ok := scalar(e)
		if !ok {
			p.fail(fmt.Sprintf("%s[%d]", field, i), "must be a string, not %s", kind(e))
			continue
		}
		out = append(out, s)
	}
	return out
}

func (p *parser) commands(field string, v any) []Command {
	var out []Command
	for i, e := range p.list(field, v) {
		f := fmt.Sprintf("%s[%d]", field, i)
		switch t := e.(type) {
		case string:
			if strings.TrimSpace(t) == "" {
				p.fail(f, "empty command")
				continue
			}
			out = append(out, Command{Shell: t})
		case []any:
			argv := p.scalarList(f, t, false)
			if len(argv) == 0 {
				p.fail(f, "empty command")
				continue
			}
			out = append(out, Command{Argv: argv})
		default:
			p.fail(f, "must be a string or a list of arguments, not %s", kind(e))
		}
	}
	return out
}

func (p *parser) file(field string, v any) (File, bool) {
	m, ok := p.mapping(field, v)
	if !ok {
		return File{}, false
	}
	f := File{Mode: DefaultFileMode}
	n := len(p.errs)
	for _, k := range sortedKeys(m) {
		val := m[k]
		kf := field + "." + k
		switch k {
		case "path":
			f.Path = p.str(kf, val)
		case "content":
			f.Content = p.str(kf, val)
		case "encoding":
			enc, err := canonicalEncoding(p.str(kf, val))
			if err != nil {
				p.fail(kf, "%v", err)
			}
			f.Encoding = enc
		case "owner":
			f.Owner = p.str(kf, val)
		case "permissions":
			if val != nil {
				mode, err := parseMode(val)
				if err != nil {
					p.fail(kf, "%v", err)
				}
				f.Mode = mode
			}
		case "append":
			f.Append = p.boolean(kf, val, false)
		case "defer":
			f.Defer = p.boolean(kf, val, false)
		case "source":
			p.fail(kf, "fetching file content from a URL is not supported on a local machine; inline it as content")
		default:
			f.Ignored = append(f.Ignored, k)
		}
	}
	if f.Path == "" {
		if _, has := m["path"]; !has || m["path"] == nil {
			p.fail(field+".path", "is required")
		} else {
			p.fail(field+".path", "must not be empty")
		}
	} else if err := checkMachinePath(f.Path); err != nil {
		p.fail(field+".path", "%v", err)
	}
	if len(p.errs) == n {
		if _, err := decodeContent(f.Content, f.Encoding); err != nil {
			p.fail(field+".content", "%v", err)
		}
	}
	return f, len(p.errs) == n
}

// checkMachinePath refuses paths that are not absolute or that climb with "..".
func checkMachinePath(path string) error {
	if !strings.HasPrefix(path, "/") {
		return fmt.Errorf("%q is not an absolute path", path)
	}
	if strings.ContainsRune(path, 0) {
		return fmt.Errorf("%q contains a NUL byte", path)
	}
	for _, part := range strings.Split(path, "/") {
		if part == ".." {
			return fmt.Errorf("%q contains \"..\"; paths may not climb out of their directory", path)
		}
	}
	if pathpkg.Clean(path) == "/" {
		return fmt.Errorf("%q names the root directory, not a file", path)
	}
	return nil
}

// parseMode accepts permissions as cloud-init does: an octal string
// ("0640", "640", "0o640") or a number YAML has already decoded (an unquoted
// 0640 is octal in YAML 1.1).
func parseMode(v any) (fs.FileMode, error) {
	var n uint64
	switch t := v.(type) {
	case string:
		s := strings.TrimSpace(t)
		digits := strings.TrimPrefix(strings.TrimPrefix(s, "0o"), "0O")
		var err error
		n, err = strconv.ParseUint(digits, 8, 32)
		if err != nil || digits == "" || strings.HasPrefix(digits, "+") {
			return 0, fmt.Errorf("%q is not an octal mode", t)
		}
	case json.Number:
		i, err := strconv.ParseUint(t.String(), 10, 32)
		if err != nil {
			return 0, fmt.Errorf("%s is not a file mode", t)
		}
		n = i
	default:
		return 0, fmt.Errorf("must be an octal string such as \"0644\", not %s", kind(v))
	}
	if n > 0o7777 {
		return 0, fmt.Errorf("%s is out of range (at most 07777)", describe(v))
	}
	mode := fs.FileMode(n & 0o777)
	if n&0o4000 != 0 {
		mode |= fs.ModeSetuid
	}
	if n&0o2000 != 0 {
		mode |= fs.ModeSetgid
	}
	if n&0o1000 != 0 {
		mode |= fs.ModeSticky
	}
	return mode, nil
}

func (p *parser) users(field string, v any) []User {
	var entries []any
	if s, ok := v.(string); ok {
		for _, part := range strings.Split(s, ",") {
			if part = strings.TrimSpace(part); part != "" {
				entries = append(entries, part)
			}
		}
	} else {
		entries = p.list(field, v)
	}
	var out []User
	for i, e := range entries {
		f := fmt.Sprintf("%s[%d]", field, i)
		if s, ok := e.(string); ok {
			if strings.TrimSpace(s) == "" {
				p.fail(f, "empty user name")
				continue
			}
			out = append(out, User{Name: s, Default: s == "default", LockPasswd: true})
			continue
		}
		m, ok := p.mapping(f, e)
		if !ok {
			continue
		}
		u := User{LockPasswd: true}
		for _, k := range sortedKeys(m) {
			val := m[k]
			kf := f + "." + k
			switch k {
			case "name":
				u.Name = p.str(kf, val)
			case "gecos":
				u.Gecos = p.str(kf, val)
			case "homedir":
				u.HomeDir = p.str(kf, val)
			case "primary_group":
				u.PrimaryGroup = p.str(kf, val)
			case "groups":
				u.Groups = p.scalarList(kf, val, true)
			case "shell":
				u.Shell = p.str(kf, val)
			case "sudo":
				switch t := val.(type) {
				case nil:
				case bool:
					if t {
						p.fail(kf, `true is not a sudo rule; give a rule such as "ALL=(ALL) NOPASSWD:ALL"`)
					}
				case string:
					u.Sudo = []string{t}
				default:
					u.Sudo = p.scalarList(kf, val, false)
				}
			case "ssh_authorized_keys", "ssh-authorized-keys":
				u.SSHAuthorizedKeys = append(u.SSHAuthorizedKeys, p.scalarList(kf, val, false)...)
			case "lock_passwd":
				u.LockPasswd = p.boolean(kf, val, true)
			case "passwd":
				u.Passwd = p.str(kf, val)
			case "hashed_passwd":
				u.HashedPasswd = p.str(kf, val)
			case "plain_text_passwd":
				u.PlainTextPasswd = p.str(kf, val)
			case "system":
				u.System = p.boolean(kf, val, false)
			case "no_create_home":
				u.NoCreateHome = p.boolean(kf, val, false)
			case "no_user_group":
				u.NoUserGroup = p.boolean(kf, val, false)
			case "uid":
				if s, ok := scalar(val); ok {
					u.UID = s
				} else if val != nil {
					p.fail(kf, "must be a number, not %s", kind(val))
				}
			default:
				u.Ignored = append(u.Ignored, k)
			}
		}
		if strings.TrimSpace(u.Name) == "" {
			p.fail(f+".name", "is required")
			continue
		}
		out = append(out, u)
	}
	return out
}

func (p *parser) ntp(field string, v any) *NTP {
	if v == nil {
		return &NTP{Enabled: true}
	}
	m, ok := p.mapping(field, v)
	if !ok {
		return nil
	}
	n := &NTP{Enabled: true}
	for _, k := range sortedKeys(m) {
		val := m[k]
		kf := field + "." + k
		switch k {
		case "enabled":
			n.Enabled = p.boolean(kf, val, true)
		case "servers":
			n.Servers = p.scalarList(kf, val, false)
		case "pools":
			n.Pools = p.scalarList(kf, val, false)
		case "ntp_client":
			n.Client = p.str(kf, val)
		default:
			n.Ignored = append(n.Ignored, k)
		}
	}
	return n
}

func (p *parser) diskSetup(field string, v any) []DiskSetup {
	if v == nil {
		return nil
	}
	m, ok := p.mapping(field, v)
	if !ok {
		return nil
	}
	var out []DiskSetup
	for _, dev := range sortedKeys(m) {
		f := field + "." + dev
		d := DiskSetup{Device: dev}
		if m[dev] != nil {
			spec, ok := p.mapping(f, m[dev])
			if !ok {
				continue
			}
			d.TableType = p.str(f+".table_type", spec["table_type"])
			d.Overwrite = p.boolean(f+".overwrite", spec["overwrite"], false)
			if l, ok := spec["layout"]; ok && l != nil {
				if s, isScalar := scalar(l); isScalar {
					d.Layout = s
				} else {
					b, _ := json.Marshal(l)
					d.Layout = string(b)
				}
			}
		}
		out = append(out, d)
	}
	return out
}

func (p *parser) fsSetup(field string, v any) FSSetup {
	m, ok := p.mapping(field, v)
	if !ok {
		return FSSetup{}
	}
	return FSSetup{
		Label:      p.str(field+".label", m["label"]),
		Filesystem: p.str(field+".filesystem", m["filesystem"]),
		Device:     p.str(field+".device", m["device"]),
		Partition:  p.str(field+".partition", m["partition"]),
	}
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func kind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	case []any:
		return "a list"
	case map[string]any:
		return "a mapping"
	}
	return fmt.Sprintf("%T", v)
}

func describe(v any) string {
	if s, ok := v.(string); ok {
		return strconv.Quote(s)
	}
	if s, ok := scalar(v); ok {
		return s
	}
	return kind(v)
}

// ShellQuote quotes s for a POSIX shell, in single quotes, when it holds
// anything but plain characters or is empty; a plain word stays as it is,
// so that a command shown to a user reads as they would type it.
func ShellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r == '-' || r == '_' || r == '.' || r == '/' || r == '=' || r == ':' || r == ',' || r == '+' || r == '@' ||
			(r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9'))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
