package progress

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func TestPlainPrintsEachNewSummaryOnce(t *testing.T) {
	var buf bytes.Buffer
	c := &clock{t: time.Unix(0, 0)}
	r := newReporter(&buf, false, c.now)
	r.Status("machines 0/3 running", "demo-cp-1: Pending")
	c.t = c.t.Add(1500 * time.Millisecond)
	r.Status("machines 0/3 running", "demo-cp-1: Provisioned")
	r.Println("a line that stays")
	c.t = c.t.Add(2 * time.Second)
	r.Status("machines 3/3 running")
	r.Stop()
	r.Status("after stop")
	want := "  [  0.0s] machines 0/3 running\na line that stays\n  [  3.5s] machines 3/3 running\n"
	if got := buf.String(); got != want {
		t.Errorf("plain output:\n%q\nwant\n%q", got, want)
	}
}

func TestLiveRedrawsTheBlockInPlace(t *testing.T) {
	var buf bytes.Buffer
	c := &clock{t: time.Unix(0, 0)}
	r := newReporter(&buf, true, c.now)
	r.width = func() int { return 20 }
	r.Status("waiting", "machine a: Pending", "a detail far longer than twenty columns")
	first := buf.String()
	if strings.Contains(first, "\x1b[1A") {
		t.Errorf("the first draw erased lines it never drew: %q", first)
	}
	if !strings.Contains(first, "      a detail far…\n") {
		t.Errorf("a long line is not cut to the width: %q", first)
	}
	buf.Reset()
	r.Status("waiting", "machine a: Running")
	second := buf.String()
	if strings.Count(second, "\x1b[1A\x1b[2K") != 3 {
		t.Errorf("the redraw did not erase the three lines drawn: %q", second)
	}
	buf.Reset()
	r.Println("kept")
	if got := buf.String(); !strings.HasPrefix(got, strings.Repeat("\x1b[1A\x1b[2K", 2)+"\rkept\n") {
		t.Errorf("a kept line is not printed above the block: %q", got)
	}
	buf.Reset()
	c.t = c.t.Add(4 * time.Second)
	r.Stop()
	if got := buf.String(); got != strings.Repeat("\x1b[1A\x1b[2K", 2)+"\r  [  4.0s] waiting\n" {
		t.Errorf("stop did not leave the last summary as a plain line: %q", got)
	}
}
