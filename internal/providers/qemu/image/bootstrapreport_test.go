package image

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"capstan.dev/capstan/internal/providers/qemu/components"
)

// The node image's bootstrap report script writes the one line the QEMU
// provider parses. It runs here under the host's sh with a fake cloud-init
// and its guest paths moved into a temporary directory.
func TestBootstrapReportScript(t *testing.T) {
	files := map[string]string{}
	for _, f := range nodeGuestFiles(components.Node{}) {
		files[f.path] = f.content
	}
	script := files["/usr/local/sbin/capstan-bootstrap-report"]
	if script == "" {
		t.Fatal("the node image has no /usr/local/sbin/capstan-bootstrap-report")
	}
	if !strings.Contains(files["/usr/lib/systemd/system/cloud-final.service.d/50-capstan-bootstrap-report.conf"], "Wants=capstan-bootstrap-report.service") {
		t.Error("cloud-final.service does not pull in capstan-bootstrap-report.service")
	}
	unit := files["/usr/lib/systemd/system/capstan-bootstrap-report.service"]
	for _, want := range []string{"After=cloud-final.service", "ExecStart=/usr/local/sbin/capstan-bootstrap-report"} {
		if !strings.Contains(unit, want) {
			t.Errorf("capstan-bootstrap-report.service lacks %q", want)
		}
	}

	fakeCloudInit := "#!/bin/sh\n" +
		"case \"$*\" in\n" +
		"'status --wait') echo status: error ;;\n" +
		"'status --long') cat <<'END'\n" +
		"status: error\n" +
		"time: Mon, 01 Jan 2024 00:00:00 +0000\n" +
		"detail:\n" +
		"('scripts_user', RuntimeError('Runparts: 1 failures (runcmd)'))\n" +
		"END\n" +
		";;\n" +
		"*) echo unexpected \"$*\" >&2; exit 2 ;;\n" +
		"esac\n"
	// What cloud-init's output log held after a kubeadm join that timed
	// out: the reason, kubeadm's hint, and lines that are not errors.
	joinOutput := "[preflight] Running pre-flight checks\n" +
		"[kubelet-start] Waiting for the kubelet to perform the TLS Bootstrap\n" +
		"error: error execution phase kubelet-start: timed out waiting for the condition\n" +
		"To see the stack trace of this error execute with --v=5 or higher\n" +
		"Cloud-init v. 22.4.2 finished at Mon, 01 Jan 2024 00:00:00 +0000\n"
	tests := []struct {
		name     string
		sentinel bool
		output   string
		want     string
	}{
		{name: "success", sentinel: true, output: joinOutput, want: "capstan-bootstrap: succeeded\n"},
		{name: "failure quotes cloud-init", want: "capstan-bootstrap: failed: cloud-init finished but SENTINEL is missing; " +
			"cloud-init says: status: error detail: ('scripts_user', RuntimeError('Runparts: 1 failures (runcmd)'))\n"},
		{name: "failure quotes kubeadm's error first", output: joinOutput, want: "capstan-bootstrap: failed: cloud-init finished but SENTINEL is missing; " +
			"the bootstrap commands printed: error: error execution phase kubelet-start: timed out waiting for the condition; " +
			"cloud-init says: status: error detail: ('scripts_user', RuntimeError('Runparts: 1 failures (runcmd)'))\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			bin := filepath.Join(dir, "bin")
			if err := os.Mkdir(bin, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(bin, "cloud-init"), []byte(fakeCloudInit), 0o755); err != nil {
				t.Fatal(err)
			}
			sentinel := filepath.Join(dir, "bootstrap-success.complete")
			if tc.sentinel {
				if err := os.WriteFile(sentinel, []byte("success\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			output := filepath.Join(dir, "cloud-init-output.log")
			if tc.output != "" {
				if err := os.WriteFile(output, []byte(tc.output), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			port := filepath.Join(dir, "ttyS1")
			s := strings.ReplaceAll(script, "/run/cluster-api/bootstrap-success.complete", sentinel)
			s = strings.ReplaceAll(s, "/dev/ttyS1", port)
			s = strings.ReplaceAll(s, "/var/log/cloud-init-output.log", output)
			s = strings.ReplaceAll(s, "/var/lib/capstan/", filepath.Join(dir, "state")+"/")
			run := func() {
				t.Helper()
				cmd := exec.Command("sh", "-c", s)
				cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"))
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("the script failed: %v: %s", err, out)
				}
			}
			run()
			want := strings.ReplaceAll(tc.want, "SENTINEL", sentinel)
			got, err := os.ReadFile(port)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != want {
				t.Errorf("the script wrote %q, want %q", got, want)
			}
			// A later boot: the sentinel in /run is gone, the report
			// stands as it was.
			_ = os.Remove(sentinel)
			run()
			if got, _ := os.ReadFile(port); string(got) != want {
				t.Errorf("after a reboot the port holds %q, want the first report only %q", got, want)
			}
		})
	}
}
