package cloudinit

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"io/fs"
	"os"
	"reflect"
	"strings"
	"testing"
)

func gz(t testing.TB, s string) []byte {
	t.Helper()
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	if _, err := w.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestParseErrors(t *testing.T) {
	cases := []struct {
		name, doc, want string
	}{
		{"empty", "", "bootstrap data is empty"},
		{"no header", "runcmd: [ls]\n", `first line is "runcmd: [ls]", want "#cloud-config"`},
		{"shell script", "#!/bin/sh\necho hi\n", `first line is "#!/bin/sh"`},
		{"jinja without cloud-config", "## template: jinja\nruncmd: []\n", "is not cloud-config"},
		{"not yaml", "#cloud-config\nruncmd: [\n", "not valid YAML"},
		{"not a mapping", "#cloud-config\n- a\n", "cloud-config must be a mapping, not a list"},
		{"hex permissions", `#cloud-config
write_files:
- {path: /a, content: x}
- {path: /b, content: y}
- {path: /c, content: z, permissions: "0x44"}
`, `write_files[2].permissions: "0x44" is not an octal mode`},
		{"decimal digits", "#cloud-config\nwrite_files:\n- {path: /a, permissions: '0689'}\n", `write_files[0].permissions: "0689" is not an octal mode`},
		{"mode range", "#cloud-config\nwrite_files:\n- {path: /a, permissions: '17777'}\n", "write_files[0].permissions: \"17777\" is out of range"},
		{"permissions list", "#cloud-config\nwrite_files:\n- {path: /a, permissions: [1]}\n", "write_files[0].permissions: must be an octal string"},
		{"no path", "#cloud-config\nwrite_files:\n- {content: x}\n", "write_files[0].path: is required"},
		{"relative path", "#cloud-config\nwrite_files:\n- {path: etc/x}\n", `write_files[0].path: "etc/x" is not an absolute path`},
		{"dotdot path", "#cloud-config\nwrite_files:\n- {path: /etc/../../x}\n", `write_files[0].path: "/etc/../../x" contains ".."`},
		{"root path", "#cloud-config\nwrite_files:\n- {path: /}\n", "names the root directory"},
		{"bad encoding", "#cloud-config\nwrite_files:\n- {path: /a, encoding: rot13, content: x}\n", `write_files[0].encoding: "rot13" is not a supported encoding`},
		{"bad base64", "#cloud-config\nwrite_files:\n- {path: /a, encoding: b64, content: '!!!'}\n", "write_files[0].content: content is not valid base64"},
		{"bad gzip", "#cloud-config\nwrite_files:\n- {path: /a, encoding: gz+b64, content: aGVsbG8=}\n", "write_files[0].content: content is not valid gzip"},
		{"binary tag", "#cloud-config\nwrite_files:\n- {path: /a, encoding: gzip, content: !!binary aGVsbG8=}\n", "!!binary"},
		{"url source", "#cloud-config\nwrite_files:\n- {path: /a, source: {uri: 'http://x'}}\n", "write_files[0].source: fetching file content from a URL is not supported"},
		{"append not bool", "#cloud-config\nwrite_files:\n- {path: /a, append: maybe}\n", `write_files[0].append: must be true or false, not "maybe"`},
		{"write_files mapping", "#cloud-config\nwrite_files: {path: /a}\n", "write_files: must be a list, not a mapping"},
		{"runcmd entry", "#cloud-config\nruncmd:\n- ls\n- {a: b}\n", "runcmd[1]: must be a string or a list of arguments, not a mapping"},
		{"runcmd empty", "#cloud-config\nruncmd: ['  ']\n", "runcmd[0]: empty command"},
		{"runcmd nested", "#cloud-config\nbootcmd:\n- [echo, [x]]\n", "bootcmd[0][1]: must be a string, not a list"},
		{"user no name", "#cloud-config\nusers:\n- {shell: /bin/sh}\n", "users[0].name: is required"},
		{"sudo true", "#cloud-config\nusers:\n- {name: a, sudo: true}\n", "users[0].sudo: true is not a sudo rule"},
		{"user keys", "#cloud-config\nusers:\n- {name: a, ssh_authorized_keys: key}\n", "users[0].ssh_authorized_keys: must be a list, not a string"},
		{"ntp servers", "#cloud-config\nntp: {servers: time.example.com}\n", "ntp.servers: must be a list, not a string"},
		{"ntp list", "#cloud-config\nntp: [a]\n", "ntp: must be a mapping, not a list"},
		{"mounts", "#cloud-config\nmounts: [[a, {b: c}]]\n", "mounts[0][1]: must be a string, not a mapping"},
		{"several errors", "#cloud-config\nwrite_files:\n- {path: a}\nruncmd: [{}]\n", "runcmd[0]: must be a string"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tc.doc))
			if err == nil {
				t.Fatalf("Parse succeeded: %+v", cfg)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not contain %q", err, tc.want)
			}
		})
	}
}

func TestParseSeveralErrorsReportedTogether(t *testing.T) {
	_, err := Parse([]byte("#cloud-config\nwrite_files:\n- {path: a}\nruncmd: [{}]\n"))
	if err == nil || !strings.Contains(err.Error(), "write_files[0].path") || !strings.Contains(err.Error(), "runcmd[0]") {
		t.Fatalf("want both errors, got %v", err)
	}
}

func TestParseEncodings(t *testing.T) {
	const text = "hello\nworld\n"
	b64 := base64.StdEncoding.EncodeToString([]byte(text))
	gzb64 := base64.StdEncoding.EncodeToString(gz(t, text))
	// Wrapped base64 as a YAML block scalar leaves line breaks in it.
	wrapped := b64[:8] + "\n    " + b64[8:]
	cases := []struct {
		encoding, content string
		want              Encoding
	}{
		{"", text, EncodingPlain},
		{"plain", text, EncodingPlain},
		{"text/plain", text, EncodingPlain},
		{"b64", b64, EncodingBase64},
		{"base64", b64, EncodingBase64},
		{"BASE64", b64, EncodingBase64},
		{"base64", strings.TrimRight(b64, "="), EncodingBase64},
		{"gz+b64", gzb64, EncodingGzipBase64},
		{"gz+base64", gzb64, EncodingGzipBase64},
		{"gzip+b64", gzb64, EncodingGzipBase64},
		{"gzip+base64", gzb64, EncodingGzipBase64},
	}
	for _, tc := range cases {
		t.Run(tc.encoding+"/"+string(tc.want), func(t *testing.T) {
			content := strings.ReplaceAll(tc.content, "\n", `\n`)
			doc := "#cloud-config\nwrite_files:\n- path: /f\n  encoding: '" + tc.encoding + "'\n  content: \"" + content + "\"\n"
			cfg, err := Parse([]byte(doc))
			if err != nil {
				t.Fatal(err)
			}
			f := cfg.WriteFiles[0]
			if f.Encoding != tc.want {
				t.Fatalf("encoding %q, want %q", f.Encoding, tc.want)
			}
			got, err := decodeContent(f.Content, f.Encoding)
			if err != nil || string(got) != text {
				t.Fatalf("decoded %q, %v", got, err)
			}
		})
	}
	t.Run("wrapped block scalar", func(t *testing.T) {
		doc := "#cloud-config\nwrite_files:\n- path: /f\n  encoding: b64\n  content: |\n    " + wrapped + "\n"
		cfg, err := Parse([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		got, _ := decodeContent(cfg.WriteFiles[0].Content, EncodingBase64)
		if string(got) != text {
			t.Fatalf("decoded %q", got)
		}
	})
	// Raw gzip bytes ("gzip"/"gz" with no base64) only reach us as text,
	// which YAML cannot carry; check the decoder directly.
	for _, enc := range []string{"gz", "gzip"} {
		e, err := canonicalEncoding(enc)
		if err != nil || e != EncodingGzip {
			t.Fatalf("%s: %v %v", enc, e, err)
		}
		got, err := decodeContent(string(gz(t, text)), e)
		if err != nil || string(got) != text {
			t.Fatalf("%s: decoded %q, %v", enc, got, err)
		}
	}
}

func TestParseModes(t *testing.T) {
	cases := []struct {
		yaml string
		want fs.FileMode
	}{
		{"", 0o644},
		{"permissions: '0640'", 0o640},
		{"permissions: '0600'", 0o600},
		{"permissions: '600'", 0o600},
		{"permissions: '0o755'", 0o755},
		{"permissions: 0640", 0o640}, // unquoted: YAML 1.1 octal
		{"permissions: '4755'", 0o755 | fs.ModeSetuid},
		{"permissions: '1777'", 0o777 | fs.ModeSticky},
		{"permissions: null", 0o644},
	}
	for _, tc := range cases {
		cfg, err := Parse([]byte("#cloud-config\nwrite_files:\n- path: /f\n  " + tc.yaml + "\n"))
		if err != nil {
			t.Fatalf("%s: %v", tc.yaml, err)
		}
		if got := cfg.WriteFiles[0].Mode; got != tc.want {
			t.Errorf("%s: mode %v, want %v", tc.yaml, got, tc.want)
		}
	}
}

func TestParseKubeadmControlPlane(t *testing.T) {
	data, err := os.ReadFile("testdata/kubeadm-controlplane.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Template != "jinja" {
		t.Errorf("template %q", cfg.Template)
	}
	if len(cfg.WriteFiles) != 10 {
		t.Fatalf("%d files", len(cfg.WriteFiles))
	}
	modes := map[string]fs.FileMode{}
	for _, f := range cfg.WriteFiles {
		modes[f.Path] = f.Mode
		if f.Owner != "root:root" {
			t.Errorf("%s owner %q", f.Path, f.Owner)
		}
	}
	if modes["/etc/kubernetes/pki/ca.crt"] != 0o640 || modes["/etc/kubernetes/pki/ca.key"] != 0o600 || modes["/run/kubeadm/kubeadm.yaml"] != 0o640 {
		t.Errorf("modes %v", modes)
	}
	if len(cfg.RunCmd) != 2 || !strings.HasPrefix(cfg.RunCmd[1].Shell, "kubeadm init --config /run/kubeadm/kubeadm.yaml") {
		t.Errorf("runcmd %+v", cfg.RunCmd)
	}
	wantUser := User{Name: "capi", Sudo: []string{"ALL=(ALL) NOPASSWD:ALL"}, Shell: "/bin/bash", LockPasswd: true,
		SSHAuthorizedKeys: []string{"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFakeKeyForTests capi@example"}}
	if len(cfg.Users) != 1 || !reflect.DeepEqual(cfg.Users[0], wantUser) {
		t.Errorf("users %+v", cfg.Users)
	}
	if cfg.NTP == nil || !cfg.NTP.Enabled || !reflect.DeepEqual(cfg.NTP.Servers, []string{"0.pool.ntp.org", "1.pool.ntp.org"}) {
		t.Errorf("ntp %+v", cfg.NTP)
	}
	if len(cfg.Ignored) != 0 {
		t.Errorf("ignored %v", cfg.Ignored)
	}
}

func TestParseWorkerJoin(t *testing.T) {
	data, err := os.ReadFile("testdata/kubeadm-worker-join.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cfg.Ignored, []string{"final_message", "package_update"}) {
		t.Errorf("ignored %v", cfg.Ignored)
	}
	if !reflect.DeepEqual(cfg.BootCmd, []Command{{Argv: []string{"cloud-init-per", "once", "mymkfs", "echo", "boot"}}}) {
		t.Errorf("bootcmd %+v", cfg.BootCmd)
	}
	if !reflect.DeepEqual(cfg.RunCmd[0], Command{Argv: []string{"swapoff", "-a"}}) {
		t.Errorf("runcmd %+v", cfg.RunCmd)
	}
	if len(cfg.Users) != 2 || !cfg.Users[0].Default || cfg.Users[1].LockPasswd ||
		!reflect.DeepEqual(cfg.Users[1].Groups, []string{"docker", "wheel"}) || cfg.Users[1].Passwd == "" {
		t.Errorf("users %+v", cfg.Users)
	}
	if !reflect.DeepEqual(cfg.DiskSetup, []DiskSetup{{Device: "/dev/sdb", TableType: "gpt", Layout: "true"}}) {
		t.Errorf("disk_setup %+v", cfg.DiskSetup)
	}
	if !reflect.DeepEqual(cfg.FSSetup, []FSSetup{{Label: "etcd_disk", Filesystem: "ext4", Device: "/dev/sdb", Partition: "auto"}}) {
		t.Errorf("fs_setup %+v", cfg.FSSetup)
	}
	if !reflect.DeepEqual(cfg.Mounts, []Mount{{Fields: []string{"LABEL=etcd_disk", "/var/lib/etcddisk"}}}) {
		t.Errorf("mounts %+v", cfg.Mounts)
	}
	if !cfg.WriteFiles[2].Append || !cfg.WriteFiles[4].Defer {
		t.Errorf("files %+v", cfg.WriteFiles)
	}
}

func TestParseTolerant(t *testing.T) {
	cfg, err := Parse([]byte("#cloud-config   \r\nruncmd:\nwrite_files:\nusers: 'default, bob'\nntp:\nfoo: {bar: 1}\nwrite_files_extra: 1\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.RunCmd) != 0 || len(cfg.WriteFiles) != 0 {
		t.Errorf("%+v", cfg)
	}
	if len(cfg.Users) != 2 || cfg.Users[1].Name != "bob" {
		t.Errorf("users %+v", cfg.Users)
	}
	if cfg.NTP == nil || !cfg.NTP.Enabled {
		t.Errorf("ntp %+v", cfg.NTP)
	}
	if !reflect.DeepEqual(cfg.Ignored, []string{"foo", "write_files_extra"}) {
		t.Errorf("ignored %v", cfg.Ignored)
	}
	// A header with nothing after it is an empty, valid document.
	if cfg, err := Parse([]byte("#cloud-config")); err != nil || cfg == nil {
		t.Errorf("header only: %v", err)
	}
	// Numbers and booleans in argv lists become strings, as in cloud-init.
	cfg, err = Parse([]byte("#cloud-config\nruncmd:\n- [sleep, 5, true]\n"))
	if err != nil || !reflect.DeepEqual(cfg.RunCmd[0].Argv, []string{"sleep", "5", "true"}) {
		t.Errorf("argv %+v %v", cfg, err)
	}
}
