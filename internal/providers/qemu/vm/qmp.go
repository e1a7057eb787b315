package vm

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// QMP, QEMU's machine protocol, is JSON lines over the unix socket qmp.sock
// in the VM's directory. QEMU serves one client at a time, so every caller
// connects, does its few commands and hangs up.

// qmpClient is a negotiated QMP connection.
type qmpClient struct {
	conn net.Conn
	in   *bufio.Reader
}

// qmpTimeout bounds one exchange when the caller's context has no deadline:
// a QEMU busy with another client does not answer until that one is done.
const qmpTimeout = 20 * time.Second

// dialQMP connects to the QMP socket of dir and negotiates capabilities.
func dialQMP(ctx context.Context, dir string) (*qmpClient, error) {
	path, closeDir, err := shortSocketPath(filepath.Join(dir, qmpSocket))
	if err != nil {
		return nil, err
	}
	defer closeDir()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, err
	}
	q := &qmpClient{conn: conn, in: bufio.NewReader(conn)}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(qmpTimeout)
	}
	_ = conn.SetDeadline(deadline)
	var greeting struct {
		QMP json.RawMessage `json:"QMP"`
	}
	if err := q.read(&greeting); err != nil {
		conn.Close()
		return nil, fmt.Errorf("qmp: reading the greeting: %w", err)
	}
	if greeting.QMP == nil {
		conn.Close()
		return nil, fmt.Errorf("qmp: %s does not speak QMP", path)
	}
	if err := q.execute("qmp_capabilities", nil, nil); err != nil {
		conn.Close()
		return nil, err
	}
	return q, nil
}

// shortSocketPath returns a path to the socket that fits a unix socket
// address (108 bytes): the path itself when short, otherwise the same file
// through a descriptor of its directory, /proc/self/fd/N/name.
func shortSocketPath(path string) (string, func(), error) {
	if len(path) < 100 {
		return path, func() {}, nil
	}
	fd, err := unix.Open(filepath.Dir(path), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", nil, &os.PathError{Op: "open", Path: filepath.Dir(path), Err: err}
	}
	return fmt.Sprintf("/proc/self/fd/%d/%s", fd, filepath.Base(path)), func() { unix.Close(fd) }, nil
}

// qmpMessage is anything QEMU sends: a command's return or error, or an
// event, which arrives whenever it happens.
type qmpMessage struct {
	Return json.RawMessage `json:"return"`
	Error  *struct {
		Class string `json:"class"`
		Desc  string `json:"desc"`
	} `json:"error"`
	Event string `json:"event"`
}

// execute runs a command and decodes its return into out (when not nil).
// Events that arrive meanwhile are skipped.
func (q *qmpClient) execute(command string, args, out any) error {
	req := map[string]any{"execute": command}
	if args != nil {
		req["arguments"] = args
	}
	b, err := json.Marshal(req)
	if err != nil {
		return err
	}
	if _, err := q.conn.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("qmp %s: %w", command, err)
	}
	for {
		var msg qmpMessage
		if err := q.read(&msg); err != nil {
			return fmt.Errorf("qmp %s: %w", command, err)
		}
		if msg.Event != "" {
			continue
		}
		if msg.Error != nil {
			return fmt.Errorf("qmp %s: %s: %s", command, msg.Error.Class, msg.Error.Desc)
		}
		if msg.Return == nil {
			continue // neither a reply nor an event: not ours
		}
		if out != nil {
			return json.Unmarshal(msg.Return, out)
		}
		return nil
	}
}

func (q *qmpClient) read(v any) error {
	line, err := q.in.ReadBytes('\n')
	if err != nil {
		return err
	}
	return json.Unmarshal(line, v)
}

// status is QMP's run state of the VM: "running", "paused", "shutdown", …
func (q *qmpClient) status() (string, error) {
	var s struct {
		Status string `json:"status"`
	}
	if err := q.execute("query-status", nil, &s); err != nil {
		return "", err
	}
	return s.Status, nil
}

func (q *qmpClient) Close() error { return q.conn.Close() }
