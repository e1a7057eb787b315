package qemu

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	qemuv1 "capstan.dev/capstan/api/infrastructure/qemu/v1beta2"
)

func TestParseBootstrapReport(t *testing.T) {
	tests := []struct {
		name string
		text string
		want bootstrapReport
	}{
		{name: "nothing yet", text: "", want: bootstrapReport{}},
		{name: "succeeded", text: "capstan-bootstrap: succeeded\n", want: bootstrapReport{Reported: true, Succeeded: true}},
		{name: "a tty's carriage return", text: "capstan-bootstrap: succeeded\r\n", want: bootstrapReport{Reported: true, Succeeded: true}},
		{name: "failed with a reason", text: "capstan-bootstrap: failed: cloud-init says: status: error\r\n",
			want: bootstrapReport{Reported: true, Detail: "cloud-init says: status: error"}},
		{name: "failed without a reason", text: "capstan-bootstrap: failed\n", want: bootstrapReport{Reported: true, Detail: "the guest gave no reason"}},
		{name: "a line still being written is not read", text: "capstan-bootstrap: succ", want: bootstrapReport{}},
		{name: "a partial line after a complete one is not read", text: "capstan-bootstrap: failed: x\ncapstan-bootstrap: succ", want: bootstrapReport{Reported: true, Detail: "x"}},
		{name: "the last report wins", text: "capstan-bootstrap: failed: first boot\ncapstan-bootstrap: succeeded\n", want: bootstrapReport{Reported: true, Succeeded: true}},
		{name: "noise around the line", text: "\x00\xff garbage\n\x00\x1b[0mcapstan-bootstrap: succeeded\nmore noise\n", want: bootstrapReport{Reported: true, Succeeded: true}},
		{name: "other lines only", text: "hello\nworld\n", want: bootstrapReport{}},
		{name: "an unknown word fails", text: "capstan-bootstrap: maybe\n",
			want: bootstrapReport{Reported: true, Detail: `the guest reported "maybe", which is neither succeeded nor failed`}},
		{name: "control bytes are dropped from the reason", text: "capstan-bootstrap: failed: a\x07b\tc\n", want: bootstrapReport{Reported: true, Detail: "ab c"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := parseBootstrapReport(tc.text); got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestReadBootstrapReport(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "report.log")
	if got, err := readBootstrapReport(path); err != nil || got.Reported {
		t.Fatalf("missing file: got %+v, %v; want no report and no error", got, err)
	}
	// Noise larger than the window the reader looks at: only the end counts.
	text := strings.Repeat("x", 2*reportWindow) + "\ncapstan-bootstrap: succeeded\n"
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := readBootstrapReport(path); err != nil || !got.Succeeded {
		t.Fatalf("got %+v, %v; want a success", got, err)
	}
	if _, err := readBootstrapReport(dir); err == nil {
		t.Errorf("reading a directory: want an error")
	}
}

func TestBootstrapVerdict(t *testing.T) {
	const console = "/vms/m1/console.log"
	failed := bootstrapReport{Reported: true, Detail: "kubeadm init failed"}
	tests := []struct {
		name   string
		facts  bootstrapFacts
		status metav1.ConditionStatus
		reason string
		// says are parts of the message; "" means no message.
		says []string
	}{
		{name: "running without a report waits",
			facts:  bootstrapFacts{Running: true, ConsoleLog: console},
			status: metav1.ConditionUnknown, reason: qemuv1.WaitingForBootstrapReportReason, says: []string{console}},
		{name: "success",
			facts:  bootstrapFacts{Report: bootstrapReport{Reported: true, Succeeded: true}, Running: true, ConsoleLog: console},
			status: metav1.ConditionTrue, reason: qemuv1.BootstrapSucceededReason},
		{name: "success stays once the VM ended",
			facts:  bootstrapFacts{Report: bootstrapReport{Reported: true, Succeeded: true}, ConsoleLog: console},
			status: metav1.ConditionTrue, reason: qemuv1.BootstrapSucceededReason},
		{name: "failure names the reason, the console and the way out",
			facts:  bootstrapFacts{Report: failed, Running: true, ConsoleTail: "[ERROR Port-6443] | error execution phase preflight", ConsoleLog: console},
			status: metav1.ConditionFalse, reason: qemuv1.BootstrapFailedReason,
			says: []string{"kubeadm init failed", console, "error execution phase preflight", "delete its Machine", "MachineHealthCheck"}},
		{name: "failure with an empty console",
			facts:  bootstrapFacts{Report: failed, Running: true, ConsoleLog: console},
			status: metav1.ConditionFalse, reason: qemuv1.BootstrapFailedReason,
			says: []string{"kubeadm init failed", console, "nothing to show"}},
		{name: "the VM ended before reporting",
			facts:  bootstrapFacts{ConsoleTail: "reboot: Power down", ConsoleLog: console},
			status: metav1.ConditionFalse, reason: qemuv1.BootstrapFailedReason,
			says: []string{"ended before reporting", "reboot: Power down", console, "delete its Machine"}},
		{name: "escape sequences leave the console excerpt",
			facts:  bootstrapFacts{ConsoleTail: "[\x1b[0;32m  OK  \x1b[0m] Reached target", ConsoleLog: console},
			status: metav1.ConditionFalse, reason: qemuv1.BootstrapFailedReason,
			says: []string{"[  OK  ] Reached target"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := bootstrapVerdict(tc.facts)
			if got.Status != tc.status || got.Reason != tc.reason {
				t.Fatalf("got %s/%s (%q), want %s/%s", got.Status, got.Reason, got.Message, tc.status, tc.reason)
			}
			if len(tc.says) == 0 && got.Message != "" {
				t.Errorf("message %q, want none", got.Message)
			}
			for _, s := range tc.says {
				if !strings.Contains(got.Message, s) {
					t.Errorf("message %q does not say %q", got.Message, s)
				}
			}
		})
	}
}

func TestTruncate(t *testing.T) {
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"abcdef", 3, "abc…"},
		{"aé", 2, "a…"}, // é is two bytes: the cut backs off to a rune start
	} {
		if got := truncate(tc.s, tc.n); got != tc.want {
			t.Errorf("truncate(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
	}
}

// standInVM starts a process that passes for the QEMU of dir, as the vm
// package recognises one (its pid in qemu.pid, dir's disk on its command
// line), and returns a function that ends it.
func standInVM(t *testing.T, dir string) (stop func()) {
	t.Helper()
	cmd := exec.Command("sh", "-c", "read line", "file="+filepath.Join(dir, "disk.qcow2")+",if=virtio")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stop = func() { stdin.Close(); cmd.Wait() }
	t.Cleanup(stop)
	if err := os.WriteFile(filepath.Join(dir, "qemu.pid"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o600); err != nil {
		t.Fatal(err)
	}
	return stop
}

func TestWatchReport(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := newNotifier(ctx, logr.Discard())
	key := client.ObjectKey{Namespace: "ns", Name: "m1"}
	wake := func(what string) {
		t.Helper()
		select {
		case ev := <-n.machines:
			if got := client.ObjectKeyFromObject(ev.Object); got != key {
				t.Fatalf("%s: woke %v, want %v", what, got, key)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no wake within 10s", what)
		}
	}
	quiet := func(what string) {
		t.Helper()
		select {
		case ev := <-n.machines:
			t.Fatalf("%s: woke %v", what, client.ObjectKeyFromObject(ev.Object))
		case <-time.After(200 * time.Millisecond):
		}
	}

	dir := t.TempDir()
	path := filepath.Join(dir, "report.log")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	stop := standInVM(t, dir)
	n.watchReport(path, key)
	n.watchReport(path, key) // a second call while watched adds nothing
	quiet("an empty report file")

	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("capstan-bootstrap: succeeded\n"); err != nil {
		t.Fatal(err)
	}
	wake("the guest wrote its report")

	// Once the VM ends, the watch ends and may be taken again.
	stop()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n.mu.Lock()
		watched := n.waiting["report:"+path] || len(n.reportKeys) > 0
		n.mu.Unlock()
		if !watched {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the VM ended 10s ago; its report is still watched")
		}
		time.Sleep(20 * time.Millisecond)
	}

	for len(n.machines) > 0 { // what is left of the write's events
		<-n.machines
	}

	// A report already there when the watch begins wakes the machine once:
	// its write raised no event the watch could see.
	standInVM(t, dir)
	n.watchReport(path, key)
	wake("a report written before the watch")
}
