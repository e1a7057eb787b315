package qemu

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"unicode"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	qemuv1 "capstan.dev/capstan/api/infrastructure/qemu/v1beta2"
)

// bootstrapReportPrefix begins the line the node image's
// capstan-bootstrap-report service writes to the guest's second serial
// port once cloud-init has run the Machine's bootstrap data.
const bootstrapReportPrefix = "capstan-bootstrap:"

// reportWindow is how much of the report file's end is read. The guest
// writes one short line per boot; anything beyond is noise.
const reportWindow = 64 << 10

// maxDetail bounds the guest's words quoted in a condition message.
const maxDetail = 1000

// bootstrapReport is what the guest said of its bootstrap.
type bootstrapReport struct {
	// Reported: the guest wrote a complete report line.
	Reported bool
	// Succeeded: the report says Cluster API's bootstrap sentinel exists.
	Succeeded bool
	// Detail is the guest's reason for a failure.
	Detail string
}

// readBootstrapReport reads the guest's report file (vm.ReportLog). A
// missing file is no report yet, not an error: the file appears when the
// VM starts.
func readBootstrapReport(path string) (bootstrapReport, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return bootstrapReport{}, nil
	}
	if err != nil {
		return bootstrapReport{}, fmt.Errorf("reading the guest's bootstrap report: %w", err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > reportWindow {
		if _, err := f.Seek(fi.Size()-reportWindow, io.SeekStart); err != nil {
			return bootstrapReport{}, fmt.Errorf("reading the guest's bootstrap report %s: %w", path, err)
		}
	}
	b, err := io.ReadAll(io.LimitReader(f, reportWindow))
	if err != nil {
		return bootstrapReport{}, fmt.Errorf("reading the guest's bootstrap report %s: %w", path, err)
	}
	return parseBootstrapReport(string(b)), nil
}

// parseBootstrapReport finds the last complete report line in s. QEMU
// appends the serial port's bytes as the guest sends them, so the text
// after the last newline may be a line still being written ("capstan-
// bootstrap: succ"): it is ignored until its newline arrives. Bytes before
// the prefix on a line are serial noise.
func parseBootstrapReport(s string) bootstrapReport {
	end := strings.LastIndexByte(s, '\n')
	if end < 0 {
		return bootstrapReport{}
	}
	lines := strings.Split(s[:end], "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		at := strings.LastIndex(lines[i], bootstrapReportPrefix)
		if at < 0 {
			continue
		}
		word := strings.TrimSpace(printable(lines[i][at+len(bootstrapReportPrefix):]))
		switch {
		case word == "succeeded":
			return bootstrapReport{Reported: true, Succeeded: true}
		case word == "failed" || strings.HasPrefix(word, "failed:"):
			detail := strings.TrimSpace(strings.TrimPrefix(strings.TrimPrefix(word, "failed"), ":"))
			if detail == "" {
				detail = "the guest gave no reason"
			}
			return bootstrapReport{Reported: true, Detail: truncate(detail, maxDetail)}
		default:
			// A report is final, so an unknown one (another image's
			// wording) fails rather than waits forever.
			return bootstrapReport{Reported: true, Detail: truncate(fmt.Sprintf("the guest reported %q, which is neither succeeded nor failed", word), maxDetail)}
		}
	}
	return bootstrapReport{}
}

// bootstrapFacts is what a reconcile knows of a started VM's bootstrap,
// for bootstrapVerdict.
type bootstrapFacts struct {
	// Report is the guest's report (readBootstrapReport).
	Report bootstrapReport
	// Running: the VM's QEMU process lives.
	Running bool
	// ConsoleTail is the last lines of the guest's console log
	// (vm.LastLines), where cloud-init and kubeadm print their errors.
	ConsoleTail string
	// ConsoleLog is the console log's path (vm.ConsoleLog).
	ConsoleLog string
}

// bootstrapVerdict judges the BootstrapSucceeded condition of a started
// VM. The guest's report is final whether or not the VM still runs; without
// one, a running VM is still bootstrapping (kubeadm takes minutes) and an
// ended one never will.
func bootstrapVerdict(f bootstrapFacts) verdict {
	const replace = "A QEMU machine is not bootstrapped again: delete its Machine (a MachineHealthCheck does) to replace it"
	switch {
	case f.Report.Reported && f.Report.Succeeded:
		return verdict{metav1.ConditionTrue, qemuv1.BootstrapSucceededReason, ""}
	case f.Report.Reported:
		return verdict{metav1.ConditionFalse, qemuv1.BootstrapFailedReason,
			fmt.Sprintf("the guest's bootstrap failed: %s. %s. %s", f.Report.Detail, consoleExcerpt(f), replace)}
	case f.Running:
		return verdict{metav1.ConditionUnknown, qemuv1.WaitingForBootstrapReportReason,
			fmt.Sprintf("waiting for the guest to report how cloud-init ran the bootstrap data; its progress is in the guest's console log %s", f.ConsoleLog)}
	default:
		return verdict{metav1.ConditionFalse, qemuv1.BootstrapFailedReason,
			fmt.Sprintf("the VM ended before reporting how its bootstrap went. %s. %s", consoleExcerpt(f), replace)}
	}
}

// consoleExcerpt quotes the end of the console log for a failure message.
func consoleExcerpt(f bootstrapFacts) string {
	tail := truncate(strings.TrimSpace(printable(f.ConsoleTail)), maxDetail)
	if tail == "" {
		return fmt.Sprintf("The guest's console log %s has nothing to show", f.ConsoleLog)
	}
	return fmt.Sprintf("Last lines of the guest's console log %s: %s", f.ConsoleLog, tail)
}

// printable drops what a serial console carries besides text, so that a
// condition message stays readable: terminal escape sequences (systemd's
// colors) and other control characters; a tab becomes a space.
func printable(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\x1b' && i+1 < len(s) && s[i+1] == '[':
			// A CSI sequence ends with a byte in '@'..'~'.
			i += 2
			for i < len(s) && (s[i] < '@' || s[i] > '~') {
				i++
			}
		case c == '\t':
			b.WriteByte(' ')
		case c < ' ' || c == 0x7f:
		default:
			b.WriteByte(c)
		}
	}
	return strings.Map(func(r rune) rune {
		if r == unicode.ReplacementChar || !unicode.IsPrint(r) && r != ' ' {
			return -1
		}
		return r
	}, b.String())
}

// truncate cuts s to at most n bytes, on a rune boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
