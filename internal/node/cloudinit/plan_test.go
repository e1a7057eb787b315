package cloudinit

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func mustParse(t testing.TB, doc string) *Config {
	t.Helper()
	cfg, err := Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func origins(steps []Step) []string {
	out := make([]string, len(steps))
	for i, s := range steps {
		out[i] = s.Origin()
	}
	return out
}

func TestPlanOrder(t *testing.T) {
	data, err := os.ReadFile("testdata/kubeadm-worker-join.yaml")
	if err != nil {
		t.Fatal(err)
	}
	steps, err := Plan(mustParse(t, string(data)), Options{Root: "/m", Hostname: "w1"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"bootcmd[0]",
		"write_files[0]", "write_files[1]", "write_files[2]", "write_files[3]",
		"disk_setup./dev/sdb", "fs_setup[0]", "mounts[0]",
		"users[0]", "users[1]",
		"ntp",
		"write_files[4]", // deferred
		"runcmd[0]", "runcmd[1]",
		"final_message", "package_update",
		"bootstrap-success",
	}
	if got := origins(steps); !reflect.DeepEqual(got, want) {
		t.Fatalf("order\n got %v\nwant %v", got, want)
	}
	for _, i := range []int{5, 6, 7, 14, 15} {
		u, ok := steps[i].(Unsupported)
		if !ok || u.Why == "" {
			t.Errorf("step %d: %#v, want Unsupported with a reason", i, steps[i])
		}
	}
	unit := steps[1].(WriteFile)
	if unit.Path != "/m/etc/systemd/system/kubelet.service.d/10-capstan.conf" || unit.Mode != 0o644 ||
		string(unit.Content) != "[Service]\nEnvironment=KUBELET_EXTRA_ARGS=--fail-swap-on=false\n" {
		t.Errorf("gzip+base64 file %+v", unit)
	}
	if got := string(steps[2].(WriteFile).Content); got != "net.ipv4.ip_forward = 1\n" {
		t.Errorf("b64 file %q", got)
	}
	hosts := steps[3].(WriteFile)
	if !hosts.Append || string(hosts.Content) != "127.0.0.1 w1\n" {
		t.Errorf("hosts %+v", hosts)
	}
	if !strings.Contains(string(steps[4].(WriteFile).Content), "name: 'w1'") {
		t.Errorf("join config not templated: %s", steps[4].(WriteFile).Content)
	}
	if rc := steps[12].(RunCommand); !reflect.DeepEqual(rc.Argv, []string{"swapoff", "-a"}) || rc.Stage != "runcmd" {
		t.Errorf("runcmd[0] %+v", rc)
	}
	mc := steps[len(steps)-1].(MarkComplete)
	if mc.Path != "/m/run/cluster-api/bootstrap-success.complete" || mc.Journal != filepath.Join("/m", JournalPath) {
		t.Errorf("mark %+v", mc)
	}
}

func TestPlanReroots(t *testing.T) {
	cases := []struct{ root, path, want string }{
		{"/srv/machines/m1", "/etc/kubernetes/pki/ca.crt", "/srv/machines/m1/etc/kubernetes/pki/ca.crt"},
		{"/srv/machines/m1/", "//etc//x/./y", "/srv/machines/m1/etc/x/y"},
		{"/srv/machines/m1", "/run/kubeadm/kubeadm.yaml", "/srv/machines/m1/run/kubeadm/kubeadm.yaml"},
	}
	for _, tc := range cases {
		cfg := &Config{WriteFiles: []File{{Path: tc.path, Mode: 0o600}}}
		steps, err := Plan(cfg, Options{Root: tc.root})
		if err != nil {
			t.Fatalf("%s: %v", tc.path, err)
		}
		if got := steps[0].(WriteFile).Path; got != tc.want {
			t.Errorf("%s under %s: %s, want %s", tc.path, tc.root, got, tc.want)
		}
	}
}

func TestPlanRefusesEscapes(t *testing.T) {
	for _, p := range []string{"/../etc/passwd", "/etc/../../../x", "relative/x", "../x", "/a/b/..", "/", "/.", "//./"} {
		// Built by hand, bypassing Parse's own check.
		_, err := Plan(&Config{WriteFiles: []File{{Path: p}}}, Options{Root: "/m"})
		if err == nil || !strings.Contains(err.Error(), "write_files[0].path") {
			t.Errorf("%q: want a write_files[0].path error, got %v", p, err)
		}
	}
	// Templated paths are checked after expansion.
	cfg := mustParse(t, "## template: jinja\n#cloud-config\nwrite_files:\n- {path: '/x/{{ v }}/y'}\n")
	if _, err := Plan(cfg, Options{Root: "/m", TemplateVars: map[string]string{"v": "../../.."}}); err == nil || !strings.Contains(err.Error(), `".."`) {
		t.Errorf("templated escape: %v", err)
	}
	if _, err := Plan(&Config{}, Options{Root: "relative"}); err == nil {
		t.Error("relative root accepted")
	}
	if _, err := Plan(&Config{}, Options{}); err == nil {
		t.Error("empty root accepted")
	}
}

func TestPlanTemplates(t *testing.T) {
	doc := "## template: jinja\n#cloud-config\nruncmd:\n- echo {{ds.meta_data.hostname}} {{ v1.local_hostname }}\n- [echo, '{{ custom }}']\n"
	steps, err := Plan(mustParse(t, doc), Options{Root: "/m", Hostname: "cp-0", TemplateVars: map[string]string{"custom": "c"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := steps[0].(RunCommand).Shell; got != "echo cp-0 cp-0" {
		t.Errorf("shell %q", got)
	}
	if got := steps[1].(RunCommand).Argv; !reflect.DeepEqual(got, []string{"echo", "c"}) {
		t.Errorf("argv %q", got)
	}
	_, err = Plan(mustParse(t, doc), Options{Root: "/m"})
	if err == nil || !strings.Contains(err.Error(), `runcmd[0]: template variable "ds.meta_data.hostname" has no value`) ||
		!strings.Contains(err.Error(), `runcmd[1][1]: template variable "custom"`) {
		t.Errorf("missing variables: %v", err)
	}
	// Without the jinja header braces are left alone.
	steps, err = Plan(mustParse(t, "#cloud-config\nruncmd: ['echo {{ x }}']\n"), Options{Root: "/m"})
	if err != nil || steps[0].(RunCommand).Shell != "echo {{ x }}" {
		t.Errorf("non-template: %v %+v", err, steps)
	}
}

func TestPlanNTPDisabled(t *testing.T) {
	steps, err := Plan(mustParse(t, "#cloud-config\nntp: {enabled: false, servers: [a]}\n"), Options{Root: "/m"})
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) != 1 {
		t.Errorf("want only MarkComplete, got %v", origins(steps))
	}
}

func TestPlanIsPureAndDeterministic(t *testing.T) {
	data, _ := os.ReadFile("testdata/kubeadm-controlplane.yaml")
	cfg := mustParse(t, string(data))
	root := t.TempDir()
	a, err := Plan(cfg, Options{Root: root, Hostname: "cp-0"})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Plan(cfg, Options{Root: root, Hostname: "cp-0"})
	if !reflect.DeepEqual(a, b) {
		t.Error("two plans differ")
	}
	if entries, _ := os.ReadDir(root); len(entries) != 0 {
		t.Errorf("Plan wrote %v", entries)
	}
}

func TestPlanReportsIgnoredEntryKeys(t *testing.T) {
	doc := "#cloud-config\nwrite_files:\n- {path: /a, r: t}\nusers:\n- {name: a, inactive: '5'}\nntp: {config: {}}\nzz: 1\n"
	steps, err := Plan(mustParse(t, doc), Options{Root: "/m"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"write_files[0]", "users[0]", "ntp", "zz", "write_files[0].r", "users[0].inactive", "ntp.config", "bootstrap-success"}
	if got := origins(steps); !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v", got)
	}
	if u := steps[4].(Unsupported); !strings.Contains(u.Describe(), "key r of write_files[0]") {
		t.Errorf("%s", u.Describe())
	}
}

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{
		"kubeadm":                   "kubeadm",
		"--config=/run/kubeadm.yml": "--config=/run/kubeadm.yml",
		"user@host:1,2+3_x":         "user@host:1,2+3_x",
		"":                          "''",
		"two words":                 "'two words'",
		"it's":                      `'it'\''s'`,
		"$HOME":                     "'$HOME'",
	} {
		if got := ShellQuote(in); got != want {
			t.Errorf("ShellQuote(%q) = %s, want %s", in, got, want)
		}
	}
}
