package vm

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeQMP serves one QMP client on dir/qmp.sock the way QEMU does: a
// greeting, then a reply per command, with an event first when told to.
// It records the commands it got.
func fakeQMP(t *testing.T, dir string, reply func(cmd string) []string) <-chan []string {
	t.Helper()
	l, err := net.Listen("unix", filepath.Join(dir, qmpSocket))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	got := make(chan []string, 1)
	go func() {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		var cmds []string
		defer func() { got <- cmds }()
		conn.Write([]byte(`{"QMP": {"version": {"qemu": {"major": 7}}, "capabilities": []}}` + "\n"))
		in := bufio.NewScanner(conn)
		for in.Scan() {
			var req struct {
				Execute string `json:"execute"`
			}
			if err := json.Unmarshal(in.Bytes(), &req); err != nil {
				return
			}
			cmds = append(cmds, req.Execute)
			for _, line := range reply(req.Execute) {
				conn.Write([]byte(line + "\n"))
			}
		}
	}()
	return got
}

func TestQMPClient(t *testing.T) {
	dir := t.TempDir()
	got := fakeQMP(t, dir, func(cmd string) []string {
		switch cmd {
		case "query-status":
			return []string{
				`{"event": "RTC_CHANGE", "data": {"offset": 0}, "timestamp": {"seconds": 1, "microseconds": 2}}`,
				`{"return": {"status": "running", "running": true}}`,
			}
		case "system_powerdown":
			return []string{`{"error": {"class": "GenericError", "desc": "no ACPI"}}`}
		}
		return []string{`{"return": {}}`}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	q, err := dialQMP(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	status, err := q.status()
	if err != nil || status != "running" {
		t.Errorf("status %q, %v; want running (the event before the reply skipped)", status, err)
	}
	if err := q.execute("system_powerdown", nil, nil); err == nil || !strings.Contains(err.Error(), "no ACPI") {
		t.Errorf("an error reply: %v, want one carrying QEMU's description", err)
	}
	q.Close()
	if cmds := <-got; strings.Join(cmds, " ") != "qmp_capabilities query-status system_powerdown" {
		t.Errorf("commands %v: capabilities must be negotiated first", cmds)
	}
}

func TestQMPLongSocketPath(t *testing.T) {
	// Deeper than a unix socket address holds: reached through the
	// directory's descriptor.
	dir := filepath.Join(t.TempDir(), strings.Repeat("d", 60), strings.Repeat("e", 60))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	// The fake listens by a relative path, as QEMU started in dir does.
	t.Chdir(dir)
	l, err := net.Listen("unix", qmpSocket)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		conn.Write([]byte(`{"QMP": {}}` + "\n"))
		in := bufio.NewScanner(conn)
		for in.Scan() {
			conn.Write([]byte(`{"return": {"status": "paused"}}` + "\n"))
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	q, err := dialQMP(ctx, dir)
	if err != nil {
		t.Fatalf("dialling %d-byte socket path: %v", len(filepath.Join(dir, qmpSocket)), err)
	}
	defer q.Close()
	if s, err := q.status(); s != "paused" || err != nil {
		t.Errorf("status %q, %v", s, err)
	}
}
