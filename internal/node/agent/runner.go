package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-logr/logr"

	"capstan.dev/capstan/internal/atomicfile"
	"capstan.dev/capstan/internal/node/cloudinit"
)

// Runner runs the bootcmd and runcmd entries of a machine's bootstrap data.
// It knows kubeadm init and join (handed to Init and Join with the host
// path of the --config file) and a few harmless shell forms: true, :,
// mkdir [-p], touch, and echo with an optional > or >> redirection, joined
// by &&. Anything else — pipes, variables, other programs — is answered
// with cloudinit.NotSupported, so it is reported as skipped, never run
// half-way: a command is checked completely before any part of it runs.
type Runner struct {
	// Root is the machine's "/" on the host.
	Root string
	Init func(ctx context.Context, configPath string) error
	Join func(ctx context.Context, configPath string) error
	Log  logr.Logger
}

var _ cloudinit.Runner = (*Runner)(nil)

// op is one recognised command, ready to run.
type op struct {
	desc string
	run  func(ctx context.Context) error
}

// Run implements cloudinit.Runner.
func (r *Runner) Run(ctx context.Context, cmd cloudinit.RunCommand) error {
	ops, err := r.recognise(cmd)
	if err != nil {
		return err
	}
	for _, o := range ops {
		r.Log.V(1).Info("Running command", "source", cmd.Source, "command", o.desc)
		if err := o.run(ctx); err != nil {
			return err
		}
	}
	return nil
}

// recognise turns a command into operations, or says why it cannot.
func (r *Runner) recognise(cmd cloudinit.RunCommand) ([]op, error) {
	var segments [][]word
	if cmd.Argv != nil {
		seg := make([]word, len(cmd.Argv))
		for i, a := range cmd.Argv {
			seg[i] = word{text: a, quoted: true}
		}
		segments = [][]word{seg}
	} else {
		var err error
		segments, err = splitShell(cmd.Shell)
		if err != nil {
			return nil, cloudinit.NotSupported(err.Error())
		}
	}
	var ops []op
	for _, seg := range segments {
		o, err := r.recogniseOne(seg)
		if err != nil {
			return nil, err
		}
		ops = append(ops, o)
	}
	if len(ops) == 0 {
		return nil, cloudinit.NotSupported("empty command")
	}
	return ops, nil
}

func texts(ws []word) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = w.text
	}
	return out
}

func (r *Runner) recogniseOne(seg []word) (op, error) {
	// Redirection: only a trailing "> path" or ">> path", for echo.
	var redirect string
	var appendTo bool
	args := seg
	for i, w := range seg {
		if w.quoted || (w.text != ">" && w.text != ">>") {
			continue
		}
		if i != len(seg)-2 {
			return op{}, cloudinit.NotSupported("redirection other than a trailing > FILE")
		}
		redirect, appendTo = seg[i+1].text, w.text == ">>"
		args = seg[:i]
		break
	}
	if len(args) == 0 {
		return op{}, cloudinit.NotSupported("empty command")
	}
	argv := texts(args)
	desc := strings.Join(texts(seg), " ")
	if redirect != "" && argv[0] != "echo" {
		return op{}, cloudinit.NotSupported(fmt.Sprintf("%s with output redirection is not run on a local machine", argv[0]))
	}
	switch argv[0] {
	case "true", ":":
		return op{desc: desc, run: func(context.Context) error { return nil }}, nil
	case "kubeadm":
		return r.kubeadm(argv, desc)
	case "echo":
		text := argv[1:]
		newline := true
		if len(text) > 0 && text[0] == "-n" {
			newline, text = false, text[1:]
		}
		content := strings.Join(text, " ")
		if newline {
			content += "\n"
		}
		if redirect == "" {
			return op{desc: desc, run: func(context.Context) error {
				r.Log.Info("Command output", "echo", strings.TrimSuffix(content, "\n"))
				return nil
			}}, nil
		}
		path, err := hostPath(r.Root, redirect)
		if err != nil {
			return op{}, cloudinit.NotSupported(err.Error())
		}
		return op{desc: desc, run: func(context.Context) error { return writeOut(path, content, appendTo) }}, nil
	case "mkdir":
		paths := argv[1:]
		parents := false
		if len(paths) > 0 && paths[0] == "-p" {
			parents, paths = true, paths[1:]
		}
		hosts, err := r.hostPaths("mkdir", paths)
		if err != nil {
			return op{}, err
		}
		return op{desc: desc, run: func(context.Context) error {
			for _, p := range hosts {
				var err error
				if parents {
					err = os.MkdirAll(p, 0o755)
				} else {
					err = os.Mkdir(p, 0o755)
				}
				if err != nil {
					return fmt.Errorf("%s: %w", desc, err)
				}
			}
			return nil
		}}, nil
	case "touch":
		hosts, err := r.hostPaths("touch", argv[1:])
		if err != nil {
			return op{}, err
		}
		return op{desc: desc, run: func(context.Context) error {
			for _, p := range hosts {
				f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY, 0o644)
				if err != nil {
					return fmt.Errorf("%s: %w", desc, err)
				}
				_ = f.Close()
			}
			return nil
		}}, nil
	}
	return op{}, cloudinit.NotSupported(fmt.Sprintf("%s is not run on a local machine", argv[0]))
}

func (r *Runner) hostPaths(cmd string, paths []string) ([]string, error) {
	if len(paths) == 0 {
		return nil, cloudinit.NotSupported(cmd + " without a path")
	}
	out := make([]string, len(paths))
	for i, p := range paths {
		if strings.HasPrefix(p, "-") {
			return nil, cloudinit.NotSupported(fmt.Sprintf("%s option %s", cmd, p))
		}
		h, err := hostPath(r.Root, p)
		if err != nil {
			return nil, cloudinit.NotSupported(err.Error())
		}
		out[i] = h
	}
	return out, nil
}

// kubeadm flags that change nothing on a local machine.
var (
	ignoredValueFlags = map[string]bool{"v": true, "ignore-preflight-errors": true, "skip-phases": true}
	ignoredBoolFlags  = map[string]bool{"upload-certs": true, "skip-token-print": true, "skip-certificate-key-print": true}
)

func (r *Runner) kubeadm(argv []string, desc string) (op, error) {
	if len(argv) < 2 || (argv[1] != "init" && argv[1] != "join") {
		return op{}, cloudinit.NotSupported("only kubeadm init and kubeadm join are run on a local machine")
	}
	sub := argv[1]
	var config string
	for i := 2; i < len(argv); i++ {
		a := argv[i]
		if !strings.HasPrefix(a, "-") {
			return op{}, cloudinit.NotSupported(fmt.Sprintf("kubeadm %s argument %q: the node reads everything from --config", sub, a))
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		switch {
		case name == "config":
			if !hasValue {
				if i+1 >= len(argv) {
					return op{}, cloudinit.NotSupported(fmt.Sprintf("kubeadm %s --config without a file", sub))
				}
				i++
				value = argv[i]
			}
			config = value
		case ignoredValueFlags[name]:
			if !hasValue {
				i++
			}
		case ignoredBoolFlags[name]:
		default:
			return op{}, cloudinit.NotSupported(fmt.Sprintf("kubeadm %s flag --%s", sub, name))
		}
	}
	if config == "" {
		return op{}, cloudinit.NotSupported(fmt.Sprintf("kubeadm %s without --config", sub))
	}
	path, err := hostPath(r.Root, config)
	if err != nil {
		return op{}, cloudinit.NotSupported(fmt.Sprintf("kubeadm %s --config: %v", sub, err))
	}
	fn := r.Init
	if sub == "join" {
		fn = r.Join
	}
	if fn == nil {
		return op{}, cloudinit.NotSupported(fmt.Sprintf("kubeadm %s is not available here", sub))
	}
	return op{desc: desc, run: func(ctx context.Context) error {
		if err := fn(ctx, path); err != nil {
			return fmt.Errorf("kubeadm %s: %w", sub, err)
		}
		return nil
	}}, nil
}

func writeOut(path, content string, appendTo bool) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if !appendTo {
		return atomicfile.WriteFile(path, []byte(content), 0o644)
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, err = f.WriteString(content)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// word is one shell word; quoted words are never operators.
type word struct {
	text   string
	quoted bool
}

// splitShell splits a shell command into &&-joined simple commands of
// words. It understands single and double quotes and backslash escapes,
// and refuses everything whose meaning it would have to guess: other
// control operators, pipes, substitutions, variables, globs.
func splitShell(s string) ([][]word, error) {
	var segs [][]word
	var cur []word
	var b strings.Builder
	inWord, quoted := false, false
	flush := func() {
		if inWord {
			cur = append(cur, word{text: b.String(), quoted: quoted})
		}
		b.Reset()
		inWord, quoted = false, false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			flush()
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, errors.New("unterminated single quote")
			}
			b.WriteString(s[i+1 : i+1+j])
			inWord, quoted = true, true
			i += j + 1
		case c == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				switch s[i] {
				case '$', '`':
					return nil, errors.New("shell expansion inside double quotes")
				case '\\':
					if i+1 < len(s) && strings.IndexByte("\"\\$`", s[i+1]) >= 0 {
						i++
					}
				}
				b.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, errors.New("unterminated double quote")
			}
			inWord, quoted = true, true
		case c == '\\':
			if i+1 >= len(s) {
				return nil, errors.New("trailing backslash")
			}
			i++
			b.WriteByte(s[i])
			inWord, quoted = true, true
		case c == '&':
			if i+1 < len(s) && s[i+1] == '&' {
				flush()
				if len(cur) == 0 {
					return nil, errors.New("&& without a command before it")
				}
				segs = append(segs, cur)
				cur = nil
				i++
				continue
			}
			return nil, errors.New("background jobs (&)")
		case c == '>':
			flush()
			if i+1 < len(s) && s[i+1] == '>' {
				cur = append(cur, word{text: ">>"})
				i++
			} else {
				cur = append(cur, word{text: ">"})
			}
		case strings.IndexByte("|;<$`(){}*?[]~#", c) >= 0:
			if c == '#' && inWord {
				b.WriteByte(c)
				continue
			}
			return nil, fmt.Errorf("shell syntax %q", string(c))
		default:
			b.WriteByte(c)
			inWord = true
		}
	}
	flush()
	if len(cur) == 0 {
		if len(segs) > 0 {
			return nil, errors.New("&& without a command after it")
		}
		return nil, errors.New("empty command")
	}
	return append(segs, cur), nil
}
