package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// chromium is the browser the console's tests drive: $CAPSTAN_CHROMIUM, or
// Debian's package. Under CI a missing browser fails the test, so the
// console is never silently left untested; elsewhere the test is skipped
// with what to install.
func chromium(t testing.TB) string {
	t.Helper()
	path := os.Getenv("CAPSTAN_CHROMIUM")
	if path == "" {
		path = "/usr/bin/chromium"
	}
	if _, err := os.Stat(path); err == nil {
		return path
	}
	const hint = "the web console's tests need Chromium: `apt-get install -y chromium` (.ci/run installs it), or set CAPSTAN_CHROMIUM to a Chrome or Chromium binary"
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s not found: %s", path, hint)
	}
	t.Skipf("%s not found: %s", path, hint)
	return ""
}

// browser is one headless Chromium with a fresh profile; tabs share its
// cookies, so a tab signed in to one console stays signed in.
type browser struct {
	t     testing.TB
	alloc context.Context
	first context.Context // the first tab's, which owns the browser
	shots string
}

func newBrowser(t testing.TB) *browser {
	t.Helper()
	// Without the background-networking flags Chromium reaches out to
	// Google's services at start, which a closed network refuses loudly.
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium(t)),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 900),
	}
	alloc, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	return &browser{t: t, alloc: alloc, shots: screenshotDir(t)}
}

// screenshotDir is where a test's screenshots go: $CAPSTAN_SCREENSHOTS, or
// test/e2e/screenshots (ignored by git), one folder per test.
func screenshotDir(t testing.TB) string {
	root := os.Getenv("CAPSTAN_SCREENSHOTS")
	if root == "" {
		root = "screenshots"
	}
	dir, err := filepath.Abs(filepath.Join(root, strings.ReplaceAll(t.Name(), "/", "_")))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// tab is one browser tab with the console open.
type tab struct {
	t   testing.TB
	b   *browser
	ctx context.Context
}

// open starts a tab of t on url (a console's signed URL). The first tab
// starts the browser and lives as long as it; later ones close when t ends.
// The first action runs without a deadline: a deadline on it would end the
// browser with it.
func (b *browser) open(t testing.TB, url string) *tab {
	t.Helper()
	parent := b.alloc
	if b.first != nil {
		parent = b.first
	}
	ctx, cancel := chromedp.NewContext(parent)
	if b.first == nil {
		b.first = ctx
		b.t.Cleanup(cancel)
	} else {
		t.Cleanup(cancel)
	}
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting Chromium: %v", err)
	}
	tb := &tab{t: t, b: b, ctx: ctx}
	tb.do("opening "+redactToken(url), chromedp.Navigate(url))
	return tb
}

var tokenParam = regexp.MustCompile(`token=[^&]+`)

func redactToken(url string) string { return tokenParam.ReplaceAllString(url, "token=…") }

const uiTimeout = 60 * time.Second

// do runs actions, failing the test with what it was doing.
func (tb *tab) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, uiTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		tb.shot("failed")
		tb.t.Fatalf("%s: %v", what, err)
	}
}

// eval runs a JavaScript expression in the page and decodes its value.
func eval[T any](tb *tab, expression string) T {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, uiTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expression))
	if err != nil {
		tb.t.Fatalf("evaluating %s: %v", expression, err)
	}
	return v
}

// waitFor waits until the expression is truthy in the page; on timeout it
// fails with what was awaited and what the page shows then, read by show.
func (tb *tab) waitFor(what string, timeout time.Duration, expression, show string) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, timeout)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](expression, chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(timeout))); err != nil {
		seen := ""
		if show != "" {
			seen = eval[string](tb, fmt.Sprintf("String(%s)", show))
		}
		tb.shot("failed")
		tb.t.Fatalf("waiting %s for %s: %v; the page shows: %s", timeout, what, err, seen)
	}
}

// text is the text of the first element matching selector, "" when none.
func (tb *tab) text(selector string) string {
	tb.t.Helper()
	return eval[string](tb, fmt.Sprintf(`(document.querySelector(%s) || {}).textContent || ""`, jsString(selector)))
}

// click clicks the element matching selector once it is visible.
func (tb *tab) click(selector string) {
	tb.t.Helper()
	tb.do("clicking "+selector, chromedp.Click(chromedp.CSS(selector), chromedp.NodeVisible))
}

// shot saves a screenshot of the tab and logs its path.
func (tb *tab) shot(name string) {
	ctx, cancel := context.WithTimeout(tb.ctx, 20*time.Second)
	defer cancel()
	// The whole page, unless it is very long (a thousand clusters): then
	// what a user sees first.
	shoot := chromedp.FullScreenshot(100)
	if height, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`document.documentElement.scrollHeight`)); err == nil && height > 5000 {
		shoot = chromedp.CaptureScreenshot()
	}
	png, err := chromedp.Run(ctx, shoot)
	if err != nil {
		tb.t.Logf("screenshot %s: %v", name, err)
		return
	}
	path := filepath.Join(tb.b.shots, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		tb.t.Logf("screenshot %s: %v", name, err)
		return
	}
	tb.t.Logf("screenshot: %s", path)
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// startConsole runs `capstan ui` with kubeconfig on a free port until the
// test ends and returns its signed URL.
func startConsole(t testing.TB, kubeconfig string) (url string, cmd *exec.Cmd) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd = exec.CommandContext(ctx, env.Binary, "ui", "--kubeconfig", kubeconfig, "--port", "0")
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 10 * time.Second
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(t.TempDir(), "ui.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		logFile.Close()
		if t.Failed() {
			log, _ := os.ReadFile(logPath)
			t.Logf("capstan ui log:\n%s", tail(string(log), 60))
		}
	})
	found := make(chan string, 1)
	go func() {
		scan := bufio.NewScanner(stdout)
		for scan.Scan() {
			if line := strings.TrimSpace(scan.Text()); strings.HasPrefix(line, "http://127.0.0.1:") {
				found <- line
			}
		}
		close(found)
	}()
	select {
	case url, ok := <-found:
		if !ok {
			log, _ := os.ReadFile(logPath)
			t.Fatalf("capstan ui exited without printing its URL:\n%s", log)
		}
		return url, cmd
	case <-time.After(time.Minute):
		log, _ := os.ReadFile(logPath)
		t.Fatalf("capstan ui printed no URL within a minute:\n%s", log)
		return "", nil
	}
}

// fill replaces an input's text as a user would: emptied, then typed key
// by key, each change reaching the page as an input event.
func fill(selector, text string) []chromedp.Action[chromedp.Void] {
	clear := script(fmt.Sprintf(`(e => { e.value = ''; e.dispatchEvent(new Event('input', {bubbles: true})); })(document.querySelector(%s))`, jsString(selector)))
	steps := []chromedp.Action[chromedp.Void]{chromedp.WaitVisible(chromedp.CSS(selector)), clear}
	if text != "" {
		steps = append(steps, chromedp.SendKeys(chromedp.CSS(selector), text, chromedp.NodeVisible))
	}
	return steps
}

// navigateHash moves the page to another of its routes, as a link would.
func navigateHash(hash string) chromedp.Action[chromedp.Void] {
	return script(fmt.Sprintf(`location.hash = %s`, jsString(hash)))
}

// script runs JavaScript for its effect.
func script(js string) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		_, err := chromedp.Evaluate[bool](fmt.Sprintf(`(() => { %s; return true; })()`, js))(ctx, t)
		return chromedp.Void{}, err
	}
}
