package components

import (
	"bufio"
	"context"
	"debug/elf"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The echo program, built by its part's recipe, is static (its image holds
// nothing else), answers / with its host and the client's address and
// /healthz with ok, and stops cleanly on SIGTERM (as a container's process
// 1 it must handle the signal itself).
func TestEchoServesAndStops(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a Go program")
	}
	// Seconds with a warm build cache; a cold one first compiles the
	// standard library for -trimpath and CGO_ENABLED=0, minutes on a busy
	// machine.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	dir, err := Build(ctx, Options{CacheDir: t.TempDir()}, EchoPart())
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "echo")
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("the echo program is dynamically linked (%v): its image holds no loader or libraries", p.Type)
		}
	}
	f.Close()

	// Port 0, through the environment: the program says which port it got.
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "PORT=0")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	// logs is written by the reader below and read only once it has sent
	// on exited.
	var logs strings.Builder
	lines := bufio.NewScanner(stderr)
	addr := make(chan string, 1)
	go func() {
		listening := regexp.MustCompile(`^echo: listening on (\S+) as host `)
		for lines.Scan() {
			logs.WriteString(lines.Text() + "\n")
			if m := listening.FindStringSubmatch(lines.Text()); m != nil {
				addr <- m[1]
			}
		}
		exited <- cmd.Wait()
	}()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	var port string
	select {
	case a := <-addr:
		if _, port, err = net.SplitHostPort(a); err != nil {
			t.Fatalf("the echo program listens on %q: %v", a, err)
		}
	case err := <-exited:
		t.Fatalf("the echo program exited before listening: %v\n%s", err, logs.String())
	case <-time.After(10 * time.Second):
		t.Fatal("the echo program did not say where it listens in 10 s")
	}

	base := "http://127.0.0.1:" + port
	client := &http.Client{Timeout: 5 * time.Second}
	get := func(method, path string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, nil)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	host, _ := os.Hostname()
	if code, body := get("GET", "/"); code != 200 || body != "host="+host+" client=127.0.0.1\n" {
		t.Errorf("GET / = %d %q; want 200 %q", code, body, "host="+host+" client=127.0.0.1\n")
	}
	if code, body := get("GET", "/healthz"); code != 200 || body != "ok\n" {
		t.Errorf("GET /healthz = %d %q; want 200 \"ok\\n\"", code, body)
	}
	if code, _ := get("GET", "/elsewhere"); code != 404 {
		t.Errorf("GET /elsewhere = %d; want 404", code)
	}
	if code, _ := get("POST", "/"); code != 405 {
		t.Errorf("POST / = %d; want 405", code)
	}
	// The client side, as a test runs it in a Pod.
	if out, err := exec.Command(bin, "get", base+"/").Output(); err != nil || string(out) != "host="+host+" client=127.0.0.1\n" {
		t.Errorf("echo get %s/: %v %q", base, err, out)
	}
	if out, err := exec.Command(bin, "get", base+"/elsewhere").Output(); err == nil {
		t.Errorf("echo get of a 404 exited 0: %q", out)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("after SIGTERM the echo program exited with %v; want status 0\n%s", err, logs.String())
		}
	case <-time.After(10 * time.Second):
		// Not its log: the reader still writes it.
		t.Fatal("the echo program did not stop in 10 s after SIGTERM")
	}

	// A port it cannot listen on: it fails and says how to choose another.
	out, err := exec.Command(bin, "-port", "not-a-port").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "-port or PORT") {
		t.Errorf("echo -port not-a-port: %v: %s; want a failure that names -port and PORT", err, out)
	}
}

func TestEchoPart(t *testing.T) {
	p := EchoPart()
	if got := strings.Join(p.Binaries(), ","); got != "echo" {
		t.Errorf("the echo part builds %s; want echo", got)
	}
	if p.CGO || len(p.Requires) != 0 {
		t.Errorf("the echo part needs cgo (%v) or modules (%v): it must build static and offline", p.CGO, p.Requires)
	}
	if !strings.HasSuffix(EchoImage, ":"+p.Version) {
		t.Errorf("EchoImage %s and the part's version %s disagree", EchoImage, p.Version)
	}
	if !strings.HasSuffix(EchoImage, "/"+EchoImageKey+":"+tagOf(EchoImage)) {
		t.Errorf("EchoImageKey %s is not the last element of %s's name, as Node.Images's keys are", EchoImageKey, EchoImage)
	}
}
