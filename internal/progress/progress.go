package progress

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"
)

// Reporter prints the state of one operation; it is safe for use by
// several goroutines.
type Reporter struct {
	w     io.Writer
	live  bool
	width func() int
	start time.Time
	now   func() time.Time

	mu      sync.Mutex
	summary string
	details []string
	drawn   int // lines of the live block on screen
	stop    chan struct{}
	stopped bool
}

// New reports to w, live when w is a terminal.
func New(w io.Writer) *Reporter {
	f, ok := w.(*os.File)
	live := ok && term.IsTerminal(int(f.Fd())) && os.Getenv("TERM") != "dumb"
	r := newReporter(w, live, time.Now)
	if live {
		r.width = func() int {
			if cols, _, err := term.GetSize(int(f.Fd())); err == nil && cols > 0 {
				return cols
			}
			return 80
		}
		go r.tick()
	}
	return r
}

func newReporter(w io.Writer, live bool, now func() time.Time) *Reporter {
	return &Reporter{w: w, live: live, width: func() int { return 80 }, start: now(), now: now, stop: make(chan struct{})}
}

// Elapsed is the time since the reporter was made.
func (r *Reporter) Elapsed() time.Duration { return r.now().Sub(r.start) }

// Status sets the current state: a one-line summary and, shown only live,
// one line per thing still waited on. A plain reporter prints the summary
// when it differs from the last one.
func (r *Reporter) Status(summary string, details ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return
	}
	changed := summary != r.summary
	r.summary, r.details = summary, details
	switch {
	case r.live:
		r.redraw()
	case changed:
		fmt.Fprintf(r.w, "  [%5.1fs] %s\n", r.Elapsed().Seconds(), summary)
	}
}

// Println prints a line that stays, above the live block.
func (r *Reporter) Println(line string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.live || r.stopped {
		fmt.Fprintln(r.w, line)
		return
	}
	r.erase()
	fmt.Fprintln(r.w, line)
	r.draw()
}

// Stop ends the live view, leaving the last summary on screen as a plain
// line so the terminal keeps a record of where the operation ended.
func (r *Reporter) Stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return
	}
	r.stopped = true
	close(r.stop)
	if r.live {
		r.erase()
		if r.summary != "" {
			fmt.Fprintf(r.w, "  [%5.1fs] %s\n", r.Elapsed().Seconds(), r.summary)
		}
	}
}

// tick refreshes the elapsed time of the live block once a second.
func (r *Reporter) tick() {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
			r.mu.Lock()
			if !r.stopped && r.summary != "" {
				r.redraw()
			}
			r.mu.Unlock()
		}
	}
}

func (r *Reporter) redraw() {
	r.erase()
	r.draw()
}

// erase moves the cursor up over the block and clears it.
func (r *Reporter) erase() {
	if r.drawn > 0 {
		fmt.Fprint(r.w, strings.Repeat("\x1b[1A\x1b[2K", r.drawn), "\r")
	}
	r.drawn = 0
}

// draw prints the block, each line cut to the terminal's width so that
// none wraps and the next erase covers exactly what was drawn.
func (r *Reporter) draw() {
	if r.summary == "" {
		return
	}
	width := r.width()
	lines := append([]string{fmt.Sprintf("  [%5.1fs] %s", r.Elapsed().Seconds(), r.summary)}, indent(r.details)...)
	for _, l := range lines {
		fmt.Fprintln(r.w, cut(l, width))
	}
	r.drawn = len(lines)
}

func indent(details []string) []string {
	out := make([]string, len(details))
	for i, d := range details {
		out[i] = "      " + d
	}
	return out
}

func cut(s string, width int) string {
	if width < 4 {
		return s
	}
	runes := []rune(s)
	if len(runes) < width {
		return s
	}
	return string(runes[:width-2]) + "…"
}
