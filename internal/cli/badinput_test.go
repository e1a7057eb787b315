package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"
)

// TestBadInputCorpus runs bad command lines of every command through the
// real command tree. Each must fail, at once and before it changes
// anything, with an error that names the flag or argument at fault; none
// may panic. The count of these cases and of the API's invalid corpus
// (config/crd/testdata/invalid, run by config/crd's validation test) is
// printed for the notes.
func TestBadInputCorpus(t *testing.T) {
	dir := isolateTemplateVariables(t)
	t.Setenv("HOME", dir)
	t.Setenv("KUBECONFIG", "")
	os.Unsetenv("KUBECONFIG")
	state := filepath.Join(dir, "state")
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	missing := filepath.Join(dir, "missing")
	garbage := write("garbage", "{{{ not yaml")
	notDir := write("file", "x")
	emptyDir := t.TempDir()
	keyShort := write("short.key", "too short")
	octal := write("octal.yaml", "WORKER_MACHINE_COUNT: \"011\"\n")
	huge := write("huge.yaml", "CONTROL_PLANE_MACHINE_COUNT: 99999999999\n")
	unquoted := write("unquoted.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ${CLUSTER_NAME}\n")
	notObjects := write("list.yaml", "- a\n- b\n")

	cases := []struct {
		args []string
		want string // the error names this
	}{
		// The command tree itself.
		{[]string{"nope"}, `unknown command "nope"`},
		{[]string{"--bogus"}, "--bogus"},
		{[]string{"version", "extra"}, `"extra"`},
		{[]string{"-v", "x", "version"}, `--v`},
		{[]string{"--state-dir"}, "--state-dir"},

		// generate cluster
		{[]string{"generate", "cluster"}, "NAME"},
		{[]string{"generate", "cluster", "a", "b"}, "NAME"},
		{[]string{"generate", "cluster", "Demo.1"}, "the NAME argument"},
		{[]string{"generate", "cluster", "-x"}, "-x"},
		{[]string{"generate", "cluster", "demo", "--kubernetes-version", "banana"}, "--kubernetes-version"},
		{[]string{"generate", "cluster", "demo", "--kubernetes-version", "1.35.0"}, "--kubernetes-version"},
		{[]string{"generate", "cluster", "demo", "--control-plane-machine-count", "2"}, "--control-plane-machine-count"},
		{[]string{"generate", "cluster", "demo", "--control-plane-machine-count", "0"}, "--control-plane-machine-count"},
		{[]string{"generate", "cluster", "demo", "--control-plane-machine-count", "three"}, "--control-plane-machine-count"},
		{[]string{"generate", "cluster", "demo", "--control-plane-machine-count", "99999999999"}, "--control-plane-machine-count"},
		{[]string{"generate", "cluster", "demo", "--worker-machine-count", "-1"}, "--worker-machine-count"},
		{[]string{"generate", "cluster", "demo", "--worker-machine-count="}, "--worker-machine-count"},
		{[]string{"generate", "cluster", "demo", "--flavor", "huge"}, "--flavor"},
		{[]string{"generate", "cluster", "demo", "--flavor", "../local/default"}, "--flavor"},
		{[]string{"generate", "cluster", "demo", "--infrastructure", "aws"}, "--infrastructure"},
		{[]string{"generate", "cluster", "demo", "--infrastructure", "."}, "--infrastructure"},
		{[]string{"generate", "cluster", "demo", "--from", missing}, "--from"},
		{[]string{"generate", "cluster", "demo", "--from", garbage}, "--from"},
		{[]string{"generate", "cluster", "demo", "--from", notObjects}, "--from"},
		{[]string{"generate", "cluster", "true", "--from", unquoted}, "--from"},
		{[]string{"generate", "cluster", "demo", "--config", missing}, "--config"},
		{[]string{"generate", "cluster", "demo", "--config", garbage}, "--config"},
		{[]string{"generate", "cluster", "demo", "--config", octal}, "--worker-machine-count"},
		{[]string{"generate", "cluster", "demo", "--config", huge}, "--control-plane-machine-count"},
		{[]string{"generate", "cluster", "demo", "-n", "My_Namespace"}, "--target-namespace"},
		{[]string{"generate", "cluster", "demo", "-n", ""}, "--target-namespace"},
		{[]string{"generate", "cluster", "demo", "--list-variables=maybe"}, "--list-variables"},

		// up checks what it can before it starts a plane.
		{[]string{"up", "extra"}, `"extra"`},
		{[]string{"up", "--cluster", "Bad_Name"}, "--cluster"},
		{[]string{"up", "--cluster", "demo", "--kubernetes-version", "banana"}, "--kubernetes-version"},
		{[]string{"up", "--cluster", "demo", "--flavor", "huge"}, "--flavor"},
		{[]string{"up", "--api-port", "port"}, "--api-port"},
		{[]string{"up", "--api-port", "70000"}, "--api-port"},
		{[]string{"up", "--api-port", "-1"}, "--api-port"},
		{[]string{"up", "--timeout", "soon"}, "--timeout"},
		{[]string{"up", "--timeout", "0s"}, "--timeout"},
		{[]string{"up", "--cluster", "demo", "--cluster-timeout", "-1m"}, "--cluster-timeout"},
		{[]string{"up", "--backup-every", "-1h"}, "--backup-every"},
		{[]string{"up", "--backup-every", "1h", "--backup-keep", "0"}, "--backup-keep"},
		{[]string{"up", "--backup-every", "1h", "--backup-dir", notDir}, "--backup-dir"},
		{[]string{"up", "--backup-every", "1h", "--backup-encryption-key-file", missing}, "--backup-encryption-key-file"},
		{[]string{"up", "--backup-every", "1h", "--backup-encryption-key-file", keyShort}, "--backup-encryption-key-file"},
		{[]string{"up", "--controllers=perhaps"}, "--controllers"},
		{[]string{"up", "--ui-port", "70000"}, "--ui-port"},
		{[]string{"up", "--ui-port", "-1"}, "--ui-port"},
		{[]string{"up", "--ui-port", "http"}, "--ui-port"},

		// ui checks its flags before it reads the kubeconfig.
		{[]string{"ui", "extra"}, `"extra"`},
		{[]string{"ui", "--port", "70000"}, "--port"},
		{[]string{"ui", "--port", "-1"}, "--port"},
		{[]string{"ui", "--kubeconfig", missing}, "--kubeconfig"},
		{[]string{"ui", "--kubeconfig", garbage}, "--kubeconfig"},

		// down, status
		{[]string{"down", "now"}, `"now"`},
		{[]string{"down", "--timeout", "forever"}, "--timeout"},
		{[]string{"status", "-o", "yaml"}, "-o"},

		// move
		{[]string{"move"}, "--to-kubeconfig, --to-directory and --from-directory"},
		{[]string{"move", "--to-directory", emptyDir, "--from-directory", emptyDir}, "--to-kubeconfig, --to-directory and --from-directory"},
		{[]string{"move", "--to-directory", emptyDir, "-n", "a", "-A"}, "--all-namespaces"},
		{[]string{"move", "--to-directory", emptyDir, "--undo", "--dry-run"}, "--undo"},
		{[]string{"move", "--to-directory", emptyDir, "--pause-timeout", "x"}, "--pause-timeout"},
		{[]string{"move", "--to-directory", emptyDir, "--kubeconfig", missing}, "--kubeconfig"},
		{[]string{"move", "--to-directory", emptyDir, "--kubeconfig", garbage}, "--kubeconfig"},
		{[]string{"move", "--to-directory", emptyDir}, "--kubeconfig"},
		{[]string{"move", "stray", "--to-directory", emptyDir}, `"stray"`},

		// backup, restore
		{[]string{"backup"}, "--to"},
		{[]string{"backup", "--to", filepath.Join(dir, "b.snap"), "--encryption-key-file", missing}, "--encryption-key-file"},
		{[]string{"backup", "--to", filepath.Join(dir, "b.snap"), "--encryption-key-file", keyShort}, "--encryption-key-file"},
		{[]string{"backup", "--to", filepath.Join(dir, "b.snap"), "--pause-timeout", "x"}, "--pause-timeout"},
		{[]string{"backup", "--to", filepath.Join(dir, "b.snap"), "--kubeconfig", missing}, "--kubeconfig"},
		{[]string{"restore"}, "--from"},
		{[]string{"restore", "--from", missing}, "--from"},
		{[]string{"restore", "--from", garbage}, "--from"},
		{[]string{"restore", "--from", garbage, "--encryption-key-file", keyShort}, "--encryption-key-file"},

		// describe, get
		{[]string{"describe", "cluster"}, "NAME"},
		{[]string{"describe", "cluster", "a", "b"}, "NAME"},
		{[]string{"describe", "cluster", "demo", "--kubeconfig", missing}, "--kubeconfig"},
		{[]string{"describe", "cluster", "demo", "--kubeconfig", garbage}, "--kubeconfig"},
		{[]string{"describe", "cluster", "demo", "--show-conditions", "x", "--kubeconfig", missing}, "--"},
		{[]string{"describe", "cluster", "demo", "--grouping=sometimes"}, "--grouping"},
		{[]string{"get", "kubeconfig"}, "NAME"},
		{[]string{"get", "kubeconfig", "demo", "--kubeconfig", missing}, "--kubeconfig"},

		// init, delete, upgrade
		{[]string{"init", "--kubeconfig", missing}, "--kubeconfig " + missing},
		{[]string{"init"}, "--kubeconfig"},
		{[]string{"init", "--infrastructure", "aws", "--kubeconfig", missing}, "--infrastructure"},
		{[]string{"init", "--timeout", "x"}, "--timeout"},
		{[]string{"init", "--wait=often"}, "--wait"},
		{[]string{"delete", "--kubeconfig", missing}, "--kubeconfig " + missing},
		{[]string{"delete", "--force", "--kubeconfig", missing}, "--kubeconfig"},
		{[]string{"delete", "--timeout", "x"}, "--timeout"},
		{[]string{"upgrade", "plan", "--kubeconfig", missing}, "--kubeconfig " + missing},
		{[]string{"upgrade", "apply", "--timeout", "x"}, "--timeout"},
		{[]string{"upgrade", "plan", "extra"}, `"extra"`},

		// manager: everything is checked before a connection is made.
		{[]string{"manager", "--concurrency", "bogus=1", "--kubeconfig", missing}, "--concurrency"},
		{[]string{"manager", "--concurrency", "machine=x", "--kubeconfig", missing}, "--concurrency"},
		{[]string{"manager", "--concurrency", "machine", "--kubeconfig", missing}, "--concurrency"},
		{[]string{"manager", "--kube-api-burst", "many"}, "--kube-api-burst"},
		{[]string{"manager", "--sync-period", "often"}, "--sync-period"},
		{[]string{"manager", "--kubeconfig", missing}, "--kubeconfig"},
		{[]string{"manager", "--kubeconfig", garbage}, "--kubeconfig"},

		// node, provider, alpha rollout, bench
		{[]string{"node", "run"}, "--dir"},
		{[]string{"node", "run", "--dir", missing}, missing},
		{[]string{"node", "run", "--dir", emptyDir, "--shutdown-timeout", "x"}, "--shutdown-timeout"},
		{[]string{"node", "lb"}, "--dir"},
		{[]string{"node", "lb", "--dir", missing}, missing},
		{[]string{"provider", "install"}, "NAME"},
		{[]string{"provider", "install", "aws", "--components", emptyDir, "--version", "v1.0.0", "--kubeconfig", missing}, `"aws"`},
		{[]string{"provider", "install", "infrastructure-aws", "--version", "v1.0.0", "--kubeconfig", missing}, "--components"},
		{[]string{"provider", "install", "infrastructure-aws", "--components", missing, "--version", "v1.0.0", "--kubeconfig", missing}, "--components"},
		{[]string{"provider", "install", "infrastructure-aws", "--components", emptyDir, "--version", "banana", "--kubeconfig", missing}, "--version"},
		{[]string{"provider", "install", "infrastructure-aws", "--webhook-port", "x"}, "--webhook-port"},
		{[]string{"alpha", "rollout", "restart"}, "RESOURCE"},
		{[]string{"alpha", "rollout", "restart", "nokind/x", "--kubeconfig", missing}, "nokind/x"},
		{[]string{"alpha", "rollout", "undo", "kcp/x", "--to-revision", "two"}, "--to-revision"},
		{[]string{"bench", "scale", "--clusters", "0"}, "--clusters"},
		{[]string{"bench", "scale", "--workers", "-1"}, "--workers"},
		{[]string{"bench", "scale", "--delays", "slow"}, "--delays"},
		{[]string{"bench", "scale", "-o", "xml"}, "-o"},
		{[]string{"bench", "scale", "--timeout", "x"}, "--timeout"},
	}
	panics := 0 // counted here: the cases' goroutines only report
	for _, tc := range cases {
		args := append([]string{"--state-dir", state}, tc.args...)
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			type result struct {
				out string
				err error
			}
			done := make(chan result, 1)
			go func() {
				defer func() {
					if r := recover(); r != nil {
						done <- result{err: fmt.Errorf("panic: %v\n%s", r, debug.Stack())}
					}
				}()
				out, _, err := runCapstan(t, args...)
				done <- result{out, err}
			}()
			select {
			case r := <-done:
				switch {
				case r.err == nil:
					t.Errorf("succeeded, printing:\n%s", r.out)
				case strings.HasPrefix(r.err.Error(), "panic: "):
					panics++
					t.Error(r.err)
				case !strings.Contains(r.err.Error(), tc.want):
					t.Errorf("error %q does not name %q", r.err, tc.want)
				default:
					t.Logf("error: %v", r.err)
				}
			case <-time.After(time.Minute):
				t.Fatal("did not fail within a minute: bad input must be refused before anything starts")
			}
		})
	}
	if _, err := os.Stat(state); err == nil {
		entries, _ := os.ReadDir(state)
		t.Errorf("bad input left a state directory behind: %v", entries)
	}
	api, err := filepath.Glob("../../config/crd/testdata/invalid/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("bad-input corpus: %d API invalid cases (config/crd/testdata/invalid), %d CLI cases, %d in all; panics: %d",
		len(api), len(cases), len(api)+len(cases), panics)
}
